"""What of the host a worker's sandbox shows read-only (:class:`HostView`, :func:`host_view`),
and how a device vendor's driver libraries are added to it (docs/gpus.md: what a GPU lease's
worker sees)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from radium.errors import SandboxError

__all__ = ["HostView", "host_view", "library_mounts", "python_paths", "shown"]

#: Merged-/usr links (or directories on older layouts) the dynamic loader needs.
TOP_LEVEL = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
#: Host files every worker may read: the loader's cache, time zone, alternatives links.
HOST_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/alternatives",
    "/sys/devices/system/cpu",
)


@dataclass(frozen=True)
class HostView:
    """The read-only part of the host a worker sees."""

    #: Host paths bound read-only at the same path.
    binds: tuple[str, ...]
    #: (link target, path) pairs: the merged-/usr links of the host.
    links: tuple[tuple[str, str], ...]


def shown(view: HostView, path: str) -> bool:
    """Whether ``view`` already shows the host path ``path`` (through a merged-/usr link too)."""
    for target, link in view.links:
        if path == link or path.startswith(link + "/"):
            path = "/" + os.path.normpath(target.lstrip("/") + path[len(link) :])
    return any(path == b or path.startswith(b.rstrip("/") + "/") for b in view.binds)


def library_mounts(
    view: HostView, libraries: Iterable[tuple[str, str]]
) -> list[tuple[str, str, str]]:
    """bubblewrap's (flag, source, path) for driver libraries given as (path the loader cache
    names, real file): each real file bound read-only at its own path, as nvidia-container-cli
    mounts them, even where the view shows it already (the driver is then read-only whatever
    the view becomes); and the cache's name made a link to it where the view lacks that name."""
    libraries = list(libraries)
    mounts: list[tuple[str, str, str]] = []
    for _, real in libraries:
        if ("--ro-bind", real, real) not in mounts:
            mounts.append(("--ro-bind", real, real))
    for path, real in libraries:
        if path != real and not shown(view, path):
            mounts.append(("--symlink", real, path))
    return mounts


def host_view(paths: Iterable[str], root: Path = Path("/")) -> HostView:
    """``/usr``, the top-level links, :data:`HOST_FILES` and ``paths``, without nested repeats."""
    links: list[tuple[str, str]] = []
    wanted = ["/usr", *HOST_FILES, *paths]
    for name in TOP_LEVEL:
        top = root / name
        if top.is_symlink():
            links.append((os.readlink(top), f"/{name}"))
        elif top.is_dir():
            wanted.append(f"/{name}")
    binds: list[str] = []
    for path in sorted({os.path.normpath(p) for p in wanted if p}):
        if path == "/":
            raise SandboxError("refusing to show workers the whole host file system ('/')")
        if not path.startswith("/") or not os.path.lexists(root / path.lstrip("/")):
            continue
        if not any(path == b or path.startswith(b.rstrip("/") + "/") for b in binds):
            binds.append(path)
    return HostView(tuple(binds), tuple(links))


def python_paths() -> list[str]:
    """What this acceptor's Python needs to run the worker: its prefixes and the interposer."""
    import radium_interposer

    package = Path(radium_interposer.__file__).resolve().parent
    return [sys.prefix, sys.base_prefix, str(package.parent)]
