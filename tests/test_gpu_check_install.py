"""scripts/gpu-check's install step, as on the GPU machine (a Python without radium, maybe
without pip, maybe without bwrap), and its table. The whole dry run, with daemons, is
integration/test_gpu_check_smoke.py."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from gpucheck import cgroup, install  # noqa: E402
from gpucheck.table import FAIL, OK, SKIP, Table  # noqa: E402

FAKE_BWRAP = '#!/bin/sh\n[ "$1" = --version ] && echo "bubblewrap 9.9"\n'


def bare_venv(root: Path) -> str:
    """A venv of this Python without its site packages and without pip: no radium there."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    return str(root / "bin" / "python")


def test_the_radium_tree_is_the_installed_packages_layout(tmp_path: Path) -> None:
    install.radium_tree(ROOT, tmp_path)
    assert (tmp_path / "radium" / "acceptor").resolve() == ROOT / "acceptor"
    assert (tmp_path / "radium" / "config.py").resolve() == ROOT / "radium" / "config.py"
    # Every subpackage from the tree, none from this checkout's editable install behind it.
    code = (
        "import radium.pool, radium.agent, radium.shim, radium.hooks, radium.packaging; "
        "print(*(m.__path__[0] for m in (radium.pool, radium.agent, radium.shim, "
        "radium.hooks, radium.packaging)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": str(tmp_path)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    found = done.stdout.split()
    names = ("pool", "agent", "shim", "hooks", "packaging")
    assert found == [str(tmp_path / "radium" / name) for name in names]


def test_a_python_without_radium_gets_the_run_path_even_with_dash_i(tmp_path: Path) -> None:
    """The pool starts its lease-socket front with ``python -I``; the acceptor's sandboxed
    worker gets no PYTHONPATH: both find radium through the run's .pth file."""
    python = bare_venv(tmp_path / "venv")
    site = install.Site(ROOT, tmp_path)
    install.radium_tree(ROOT, site.tree)
    probe = [python, "-I", "-c", "import radium.errors, radium_interposer; print(radium.__file__)"]
    assert subprocess.run(probe, cwd=tmp_path, capture_output=True).returncode != 0
    pth = install.isolated_path(site, python)
    assert pth is not None and pth.parent.name == "site-packages"
    done = subprocess.run(probe, cwd=tmp_path, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == str(site.tree / "radium" / "__init__.py")
    pth.unlink()
    assert subprocess.run(probe, cwd=tmp_path, capture_output=True).returncode != 0


def test_this_checkouts_venv_needs_no_pth(tmp_path: Path) -> None:
    site = install.Site(ROOT, tmp_path)
    install.radium_tree(ROOT, site.tree)
    assert install.isolated_path(site) is None


def test_wheels_are_unpacked_where_python_has_no_pip(tmp_path: Path) -> None:
    wheel = tmp_path / "probe_pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("probe_pkg/__init__.py", "VALUE = 42\n")
        archive.writestr("probe_pkg-1.0.dist-info/METADATA", "Name: probe_pkg\nVersion: 1.0\n")
    python = bare_venv(tmp_path / "venv")
    how = install.install_wheels([wheel], tmp_path / "site", python)
    assert how == "unpacked (no pip)"
    code = "import probe_pkg; print(probe_pkg.VALUE)"
    env = {"PYTHONPATH": str(tmp_path / "site")}
    done = subprocess.run([python, "-c", code], env=env, capture_output=True, text=True)
    assert done.stdout.strip() == "42", done.stderr


def test_the_carried_bwrap_serves_where_the_machine_has_none(tmp_path: Path) -> None:
    carried = tmp_path / ".gpu-check"
    (carried / "bin").mkdir(parents=True)
    (carried / "bin" / "bwrap").write_text(FAKE_BWRAP)  # not executable, as a copy may be
    found = install.bwrap_on_path(carried, tmp_path / "bin", path=str(tmp_path / "none"))
    assert found == f"{tmp_path / 'bin' / 'bwrap'} (bubblewrap 9.9)"
    assert (tmp_path / "bin" / "bwrap").resolve() == carried / "bin" / "bwrap"


def test_the_carried_bwrap_gets_the_carried_libraries_when_it_needs_them(tmp_path: Path) -> None:
    carried = tmp_path / ".gpu-check"
    (carried / "bin").mkdir(parents=True)
    # Runs only with LD_LIBRARY_PATH set: as a binary whose library the machine lacks.
    needs = '#!/bin/sh\n[ -n "$LD_LIBRARY_PATH" ] || exit 127\necho "$LD_LIBRARY_PATH"\n'
    (carried / "bin" / "bwrap").write_text(needs)
    found = install.bwrap_on_path(carried, tmp_path / "bin", path=str(tmp_path / "none"))
    assert found == f"{tmp_path / 'bin' / 'bwrap'} ({carried / 'lib'})"


def test_a_machine_without_bwrap_and_none_carried_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError) as raised:
        install.bwrap_on_path(tmp_path / "empty", tmp_path / "bin", path=str(tmp_path))
    assert str(raised.value) == f"no bwrap on this machine and none carried in {tmp_path}/empty"


def test_the_table_fails_on_any_failed_row_and_goes_to_out(tmp_path: Path) -> None:
    table = Table("gpu-check")
    table.ok("first", "1 ms")
    table.add("second", SKIP, "dry run")
    before = table.failed
    table.judge("third", False, "a\nb")
    assert (before, table.failed) == (False, True)
    text = table.render()
    lines = text.splitlines()
    assert lines[3:6] == [
        f"first   {OK}      1 ms",
        f"second  {SKIP}    dry run",
        f"third   {FAIL}    a | b",
    ]
    assert lines[-1] == "gpu-check FAILED: 3 rows, 1 failed"
    assert table.write(str(tmp_path)) == tmp_path / "gpu-check.txt"
    assert (tmp_path / "gpu-check.txt").read_text() == text
    assert table.write("") is None  # OUT set but empty: nowhere


def test_the_run_moves_to_a_cgroup_that_hands_the_acceptor_its_controllers(
    tmp_path: Path,
) -> None:
    # The GPU machine's command cgroup gets no controller from its parent; the root has them.
    fs = tmp_path / "fs"
    own = fs / "process_api" / "x1"
    own.mkdir(parents=True)
    (fs / "cgroup.controllers").write_text("cpu memory pids\n")
    (fs / "cgroup.subtree_control").write_text("cpu memory pids\n")
    (own / "cgroup.controllers").write_text("\n")
    proc = tmp_path / "cgroup"
    proc.write_text("0::/process_api/x1\n")
    moved = cgroup.enter(fs, proc)
    assert moved is not None and moved.origin == own
    assert moved.made.parent == fs
    assert (moved.made / "cgroup.procs").read_text() == str(os.getpid())
    (moved.made / "cgroup.procs").unlink()  # a real cgroupfs has no files to remove
    moved.undo()
    assert not moved.made.exists() and (own / "cgroup.procs").exists()
    # A cgroup that has the controllers, and cgroup v1: nothing moves.
    (own / "cgroup.controllers").write_text("cpu memory pids\n")
    assert cgroup.enter(fs, proc) is None
    (fs / "cgroup.controllers").unlink()
    assert cgroup.enter(fs, proc) is None
