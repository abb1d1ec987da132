"""Static files shipped in packaging/ are well-formed and agree with the code that uses them."""

from __future__ import annotations

from pathlib import Path

import tomllib

PACKAGING = Path(__file__).parents[1] / "packaging"


def test_runtimeclass_manifest_names_the_radium_handler() -> None:
    lines = [
        line
        for line in (PACKAGING / "kubernetes" / "runtimeclass.yaml").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    fields = dict(
        line.split(": ", 1) for line in lines if not line.startswith(" ") and ": " in line
    )
    assert fields == {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "handler": "radium"}
    assert "  name: radium" in lines


def test_systemd_units_start_real_subcommands() -> None:
    from radium.cli import build_parser

    parser = build_parser()
    units = sorted((PACKAGING / "systemd").glob("*.service"))
    assert [u.name for u in units] == [
        "radium-acceptor.service",
        "radium-agent.service",
        "radium-pool.service",
    ]
    for unit in units:
        exec_start = next(
            line for line in unit.read_text().splitlines() if line.startswith("ExecStart=")
        )
        program, *args = exec_start.split("=", 1)[1].split()
        assert program == "/usr/bin/radium"
        assert parser.parse_args(args).func is not None  # parses as a real subcommand


def test_pyproject_lists_every_package_it_ships() -> None:
    """setuptools ships only the packages ``packages`` names: a subpackage left out (a pool
    wing, the agent) installs from a checkout and is missing from every wheel and .deb."""
    root = PACKAGING.parent
    tools = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = set()
    for package, folder in tools["package-dir"].items():
        for init in (root / folder).rglob("__init__.py"):
            inner = init.parent.relative_to(root / folder).parts
            if "__pycache__" not in inner and not any(p.startswith(".") for p in inner):
                found.add(".".join([package, *inner]))
    assert found == set(tools["packages"])
