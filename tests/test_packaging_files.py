"""Static files shipped in packaging/ are well-formed and agree with the code that uses them."""

from __future__ import annotations

from pathlib import Path

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
