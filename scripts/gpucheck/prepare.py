"""``scripts/gpu-check --prepare``: fill ``.gpu-check/`` with what the GPU machine lacks.

The GPU machine (x86-64, Python 3.12 with CUDA torch, no package registry) has torch, numpy,
protobuf, psutil, rich, prometheus-client and nvidia-ml-py; what radium imports when its pool,
acceptor, agent and ``radium exec`` start is found by importing them here, and each such
distribution it lacks (or has too old: grpcio) is downloaded as a cp312 manylinux wheel of the
version this Python has. cryptography (and cffi, pycparser) come too: TLS. bubblewrap's binary
comes from Debian's package. ``manifest.json`` lists what is there and the modules the device
must import after installing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

__all__ = ["FOLDER", "MANIFEST", "SERVICE_MODULES", "prepare"]

FOLDER = ".gpu-check"
MANIFEST = "manifest.json"
#: What the services and ``radium exec`` import at start (the device checks them too).
SERVICE_MODULES = (
    "radium.cli",
    "radium.pool.api.server",
    "radium.acceptor.daemon",
    "radium.agent.process",
    "radium.execute",
    "radium.upconfig",
    "radium.poolclient",
)
#: On the GPU machine already, at versions radium accepts (notes: the device's probe).
ON_DEVICE = {"protobuf", "psutil", "rich", "prometheus_client", "prometheus-client",
             "nvidia-ml-py", "numpy", "torch", "setuptools"}  # fmt: skip
#: On the device, but older than radium needs.
TOO_OLD = {"grpcio"}
#: Not imported at start, but by TLS (radium certs, a pool with [pool.tls]).
ALSO = ("cryptography", "cffi", "pycparser")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
#: The folder must travel with the repository (the device tool carries 64 MiB in all).
MAX_BYTES = 30 * 2**20

PROBE = """
import importlib, json, sys
from importlib import metadata
for name in sys.argv[1:]:
    importlib.import_module(name)
owners = metadata.packages_distributions()
tops = {n.split(".")[0] for n in list(sys.modules)} - set(sys.stdlib_module_names)
print(json.dumps(sorted({d for t in tops for d in owners.get(t, []) if d != "radium"})))
"""


def imported_distributions(python: str) -> list[str]:
    """The distributions whose modules the services import at start (by importing them)."""
    done = subprocess.run(
        [python, "-c", PROBE, *SERVICE_MODULES], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"gpu-check --prepare: importing radium failed:\n{done.stderr[-2000:]}")
    found: list[str] = json.loads(done.stdout)
    # grpcio-tools is tried by grpc itself (optional); never needed at run time.
    return [d for d in found if d not in ON_DEVICE and d != "grpcio-tools"]


def wanted() -> list[str]:
    """name==version of each wheel to carry: this Python's versions."""
    names = sorted({*imported_distributions(sys.executable), *TOO_OLD, *ALSO})
    return [f"{name}=={metadata.version(name)}" for name in names]


def download(requirements: list[str], folder: Path, version: str) -> None:
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
            "--python-version", version, "--implementation", "cp",
            "--dest", str(folder)]  # fmt: skip
    for platform in PLATFORMS:
        argv += ["--platform", platform]
    subprocess.run([*argv, *requirements], check=True)


def bubblewrap(folder: Path) -> str:
    """bwrap into ``folder/bin``: from Debian's package (apt-get download), else this host's."""
    target = folder / "bin" / "bwrap"
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        got = subprocess.run(["apt-get", "download", "bubblewrap"], cwd=scratch, check=False)
        debs = sorted(Path(scratch).glob("bubblewrap_*.deb"))
        if got.returncode == 0 and debs:
            subprocess.run(["dpkg-deb", "-x", str(debs[0]), f"{scratch}/x"], check=True)
            shutil.copy2(f"{scratch}/x/usr/bin/bwrap", target)
            return debs[0].name
    host = shutil.which("bwrap")
    if host is None:
        raise SystemExit("gpu-check --prepare: no bubblewrap: apt-get download failed, none here")
    shutil.copy2(host, target)
    return host


def libraries(binary: Path, folder: Path) -> list[str]:
    """The shared libraries ``binary`` needs beyond glibc, copied into ``folder`` (the GPU
    machine may lack one: libcap2 is not in every image); their names."""
    folder.mkdir(parents=True, exist_ok=True)
    found = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=True)
    names = []
    for line in found.stdout.splitlines():
        name, arrow, where = line.strip().partition(" => ")
        path = where.split(" (")[0]
        if arrow and path.startswith("/") and not name.startswith(("libc.so", "ld-linux")):
            shutil.copy2(path, folder / name)
            names.append(name)
    return names


def prepare(root: Path, version: str = "3.12") -> int:
    """Fill ``root/.gpu-check`` afresh for a CPython ``version`` (the GPU image's); print
    what it holds."""
    folder = root / FOLDER
    if folder.exists():
        shutil.rmtree(folder)
    (folder / "wheels").mkdir(parents=True)
    requirements = wanted()
    download(requirements, folder / "wheels", version)
    source = bubblewrap(folder)
    libs = libraries(folder / "bin" / "bwrap", folder / "lib")
    wheels = sorted(p.name for p in (folder / "wheels").glob("*.whl"))
    manifest = {"python": version, "wheels": wheels, "requirements": requirements,
                "bwrap": source, "libs": libs, "modules": list(SERVICE_MODULES)}  # fmt: skip
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    if size > MAX_BYTES:
        raise SystemExit(f"gpu-check --prepare: {folder} is {size / 2**20:.1f} MiB, over 30")
    print(f"{folder}: {len(wheels)} wheels ({', '.join(requirements)}), bwrap from {source}; "
          f"{size / 2**20:.1f} MiB. Carry it: carry=[\"{FOLDER}\"]")  # fmt: skip
    return 0
