"""Make the GPU machine ready from the carried ``.gpu-check/`` folder, with no registry.

The wheels go into a site folder of the run (``pip install --no-index --no-deps --target``,
or unpacked where that Python has no pip: a wheel is a zip of its install tree); radium itself
is laid out there as its installed package is (``radium.pool`` is ``pool/``...: symlinks into
this checkout); bubblewrap goes on ``PATH``; the client Python is a venv without torch.
Standard library only: nothing else is importable before this runs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

__all__ = ["Site", "client_python", "import_check", "install", "isolated_path"]

#: Where a Python started with ``-I`` (radium's own helpers: the pool's lease-socket front)
#: finds the run's path when radium is not installed in it: a ``.pth`` file in its
#: site-packages, there only for the run.
PTH = "radium-gpu-check.pth"


def subpackages(repo: Path) -> dict[str, str]:
    """The installed package's layout that is not the checkout's: ``radium.NAME`` -> its
    folder, as pyproject.toml's package-dir says (read without a TOML parser: the device's
    Python may be older than tomllib)."""
    text = (repo / "pyproject.toml").read_text()
    return dict(re.findall(r'"radium\.(\w+)" = "([^"]+)"', text))


class Site:
    """The run's Python path: carried wheels, radium's package tree, the interposer."""

    def __init__(self, repo: Path, root: Path) -> None:
        self.repo = repo
        self.packages = root / "site"
        self.tree = root / "radium-tree"
        self.bin = root / "bin"

    @property
    def pythonpath(self) -> str:
        parts = [self.tree, self.packages, self.repo / "interposer"]
        return os.pathsep.join(str(p) for p in parts)

    def path(self) -> str:
        return os.pathsep.join([str(self.bin), os.environ.get("PATH", os.defpath)])


def _has_pip(python: str) -> bool:
    done = subprocess.run([python, "-m", "pip", "--version"], capture_output=True, check=False)
    return done.returncode == 0


def install_wheels(wheels: list[Path], target: Path, python: str = sys.executable) -> str:
    """Install ``wheels`` into ``target``; how it was done. Where pip is missing or fails,
    each wheel is unpacked (for ``--target`` that is what pip does with these: no scripts)."""
    target.mkdir(parents=True, exist_ok=True)
    if not wheels:
        return "none to install"
    how = "unpacked (no pip)"
    if _has_pip(python):
        argv = [python, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
                "--disable-pip-version-check", "--target", str(target)]  # fmt: skip
        done = subprocess.run([*argv, *map(str, wheels)], capture_output=True, text=True)
        if done.returncode == 0:
            return "pip --target"
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        how = f"unpacked (pip failed: {last})"
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(target)
    return how


def radium_tree(repo: Path, tree: Path) -> None:
    """``tree/radium``: the checkout's ``radium/`` files with its subpackages beside them."""
    package = tree / "radium"
    package.mkdir(parents=True, exist_ok=True)
    for entry in (repo / "radium").iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for name, folder in subpackages(repo).items():
        (package / name).symlink_to(repo / folder)


def bwrap_on_path(carried: Path, bin_folder: Path, path: str | None = None) -> str:
    """bubblewrap on ``PATH``: this host's, else the carried binary (through a wrapper that
    gives it the carried libraries when the machine lacks one); what runs, and its version."""
    bin_folder.mkdir(parents=True, exist_ok=True)
    bwrap = shutil.which("bwrap", path=path) or ""  # path: PATH's folders (None: $PATH)
    if not bwrap:
        source = (carried / "bin" / "bwrap").resolve()
        if not source.exists():
            raise RuntimeError(f"no bwrap on this machine and none carried in {carried}")
        source.chmod(0o755)
        bwrap = str(bin_folder / "bwrap")
        if _version(str(source)) is None:  # a library missing here: the carried ones
            wrapper = f'#!/bin/sh\nLD_LIBRARY_PATH={carried.resolve() / "lib"} exec {source} "$@"\n'
            Path(bwrap).write_text(wrapper)
            Path(bwrap).chmod(0o755)
        else:
            Path(bwrap).symlink_to(source)
    version = _version(bwrap)
    if version is None:
        raise RuntimeError(f"{bwrap} does not run (bwrap --version failed)")
    return f"{bwrap} ({version})"


def _version(bwrap: str) -> str | None:
    done = subprocess.run([bwrap, "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else None


def radium_installed(site: Site, python: str = sys.executable) -> bool:
    """Whether ``python -I`` (no PYTHONPATH, not the working directory) imports radium: this
    checkout's venv (an editable install), not the GPU machine's Python."""
    probe = [python, "-I", "-c", "import radium.pool.leases.front"]
    return subprocess.run(probe, cwd=site.tree, capture_output=True).returncode == 0


def install(site: Site, carried: Path, dry_run: bool) -> str:
    """Everything the run needs on its path; a line saying what was done. A dry run from
    this checkout's venv installs no wheels (it has radium's packages)."""
    radium_tree(site.repo, site.tree)
    bwrap = bwrap_on_path(carried, site.bin)
    if dry_run and radium_installed(site):
        site.packages.mkdir(parents=True, exist_ok=True)
        return f"wheels not installed (this Python has radium's packages); bwrap {bwrap}"
    manifest = carried / "manifest.json"
    if not manifest.exists():
        raise RuntimeError(f"{manifest} missing: run scripts/gpu-check --prepare and carry it")
    names = json.loads(manifest.read_text())["wheels"]
    how = install_wheels([carried / "wheels" / n for n in names], site.packages)
    return f"{len(names)} wheels ({how}); bwrap {bwrap}"


def isolated_path(site: Site, python: str = sys.executable) -> Path | None:
    """When ``python -I`` cannot import radium (not installed in it: the GPU machine), put the
    run's path first in its ``sys.path`` through a ``.pth`` file in its site-packages (-I
    keeps those); that file, for the caller to remove at the end. None when radium is there
    (this checkout's venv: an editable install)."""
    if radium_installed(site, python):
        return None
    where = [python, "-I", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]
    purelib = subprocess.run(where, capture_output=True, text=True, check=True).stdout.strip()
    pth = Path(purelib) / PTH
    # Before site-packages: the carried grpcio is newer than the one there.
    pth.write_text(f"import sys; sys.path[:0] = {site.pythonpath.split(os.pathsep)!r}\n")
    return pth


def import_check(site: Site, modules: list[str], python: str = sys.executable) -> None:
    """Import what the services import, with the run's path; RuntimeError names what failed.
    Run outside the checkout: its ``radium/`` alone is not the package (no ``radium.pool``)."""
    env = {"PATH": site.path(), "PYTHONPATH": site.pythonpath}
    code = "import importlib, sys\nfor m in sys.argv[1:]: importlib.import_module(m)"
    done = subprocess.run(
        [python, "-c", code, *modules],
        env=env,
        cwd=site.tree,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"importing radium's services failed: {last}")


def client_python(root: Path, python: str = sys.executable) -> str:
    """A venv of ``python`` without its site packages (so without torch); its interpreter."""
    venv = root / "client"
    subprocess.run([python, "-m", "venv", "--without-pip", str(venv)], check=True)
    client = str(venv / "bin" / "python")
    done = subprocess.run([client, "-c", "import torch"], capture_output=True, env={})
    if done.returncode == 0:
        raise RuntimeError(f"the client Python {client} imports torch: it must not have it")
    return client
