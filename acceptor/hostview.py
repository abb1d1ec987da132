"""What of the host a worker's sandbox shows read-only (:class:`HostView`), and how a device
vendor's driver libraries are added to it (docs/gpus.md: what a GPU lease's worker sees)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["HostView", "library_mounts", "shown"]


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
