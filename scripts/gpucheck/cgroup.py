"""A cgroup v2 the acceptor may delegate from, where the run's own cannot.

The acceptor nests each lease's cgroup under its own and enables the memory, cpu and pids
controllers there (acceptor/limits.py). A command on the GPU machine starts in a cgroup its
parent hands no controller to (``/process_api/<id>``), so the run moves itself into a new
cgroup right under the root, which hands them all down, and moves back and removes it at the
end. Elsewhere (cgroup v1, or a cgroup that has the controllers) nothing is done.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["Moved", "enter"]

NEEDED = ("memory", "cpu", "pids")


class Moved:
    """Where the run moved from, to undo it."""

    def __init__(self, origin: Path, made: Path) -> None:
        self.origin, self.made = origin, made

    def undo(self) -> None:
        """Back to the original cgroup; the made one removed (its leaves first)."""
        with contextlib.suppress(OSError):
            (self.origin / "cgroup.procs").write_text(str(os.getpid()))
        for leaf in sorted(self.made.glob("*/"), reverse=True):
            with contextlib.suppress(OSError):
                leaf.rmdir()
        with contextlib.suppress(OSError):
            self.made.rmdir()


def enter(
    root: Path = Path("/sys/fs/cgroup"), proc: Path = Path("/proc/self/cgroup")
) -> Moved | None:
    """Move this process into ``<root>/radium-gpu-check-<pid>`` where its own cgroup lacks a
    controller the acceptor needs; None when nothing had to move."""
    if not (root / "cgroup.controllers").exists():
        return None  # cgroup v1: the acceptor uses each controller's own hierarchy
    own = root / proc.read_text().strip().split("::", 1)[1].lstrip("/")
    handed = (own / "cgroup.controllers").read_text().split()
    if all(c in handed for c in NEEDED):
        return None
    top = (root / "cgroup.subtree_control").read_text().split()
    missing = [c for c in NEEDED if c not in top]
    if missing:
        raise RuntimeError(f"the cgroup root {root} hands down no {missing[0]} controller")
    made = root / f"radium-gpu-check-{os.getpid()}"
    made.mkdir(exist_ok=True)
    (made / "cgroup.procs").write_text(str(os.getpid()))
    return Moved(own, made)
