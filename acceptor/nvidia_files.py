"""The host files an NVIDIA lease's worker needs: its GPUs' device nodes and the driver's
user-space libraries, found the way nvidia-container-cli finds them (docs/gpus.md).

Both take ``root``, the host's file system (``/``; a fixture tree in tests), and answer host
paths: the sandbox binds each at the same path.
"""

from __future__ import annotations

import os
from pathlib import Path

from radium.acceptor.ldcache import entries, native_flags

__all__ = ["CONTROL_NODES", "DRIVER_LIBRARIES", "driver_libraries", "nvidia_nodes"]

#: The nodes every CUDA process opens, whichever GPU it uses. Not ``nvidia-caps``: those grant
#: MIG and fabric capabilities a lease's worker has no business with, nor ``nvidia-modeset``.
CONTROL_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools")

#: The driver libraries of the "utility" and "compute" capabilities (what CUDA containers get
#: by default), by name as libnvidia-container lists them (src/nvc_info.c): NVML, the CUDA
#: driver API and what it loads at run time (PTX JIT, NVVM, the debugger, the compiler).
DRIVER_LIBRARIES = (
    "libnvidia-ml.so",  # utility: NVML
    "libnvidia-cfg.so",
    "libnvidia-nscq.so",  # NVSwitch queries
    "libcuda.so",  # compute: the CUDA driver API
    "libcudadebugger.so",
    "libnvidia-opencl.so",
    "libnvidia-gpucomp.so",
    "libnvidia-ptxjitcompiler.so",
    "libnvidia-fatbinaryloader.so",
    "libnvidia-allocator.so",
    "libnvidia-compiler.so",
    "libnvidia-pkcs11.so",
    "libnvidia-pkcs11-openssl3.so",
    "libnvidia-nvvm.so",
)


def nvidia_nodes(minors: list[int], root: Path = Path("/")) -> list[str]:
    """The control nodes and ``/dev/nvidia<minor>`` of these GPUs, and no other GPU's node:
    those of them present under ``root``."""
    names = [*CONTROL_NODES, *(f"nvidia{minor}" for minor in minors if minor >= 0)]
    return [f"/dev/{name}" for name in names if os.path.lexists(root / "dev" / name)]


def driver_libraries(root: Path = Path("/"), machine: str | None = None) -> list[tuple[str, str]]:
    """(path the loader cache names, the real file it resolves to) of each driver library of
    this machine's architecture that the cache lists and ``root`` holds, in cache order."""
    native = native_flags(machine)
    found: list[tuple[str, str]] = []
    for entry in entries(root):
        if native is not None and entry.flags != native:
            continue  # a 32-bit build of the same name
        if not _named(entry.name) or not entry.path.startswith("/"):
            continue
        real = _resolve(root, entry.path)
        if real is None:
            continue  # a stale cache entry
        if (entry.path, real) not in found:
            found.append((entry.path, real))
    return found


def _resolve(root: Path, path: str) -> str | None:
    """The real file ``path`` names on the host whose file system is at ``root``: links are
    followed inside ``root`` (an absolute link target is the host's, so it is ``root``'s too).
    None when it is missing, not a file, or its links loop."""
    parts, done, hops = [p for p in path.split("/") if p], "", 0
    while parts:
        part = parts.pop(0)
        if part in (".", ""):
            continue
        if part == "..":
            done = done.rsplit("/", 1)[0]
            continue
        here = root / (done + "/" + part).lstrip("/")
        if here.is_symlink():
            hops += 1
            if hops > 40:  # as the kernel's ELOOP
                return None
            target = os.readlink(here)
            if target.startswith("/"):
                done = ""
            parts = [p for p in target.split("/") if p] + parts
            continue
        done += "/" + part
    return done if (root / done.lstrip("/")).is_file() else None


def _named(name: str) -> bool:
    """``libcuda.so`` or ``libcuda.so.<version>``, not ``libcuda.so-foo`` (another library)."""
    return any(name == lib or name.startswith(lib + ".") for lib in DRIVER_LIBRARIES)
