"""The runtime directories ``radium exec`` makes (``hook.state_dir/exec-HOST-PID-HEX``).

``radium exec`` removes its own when it ends; when it is killed (``kill -9``) the agent does,
as it releases the lease (the watch sees the holder's process gone), and at its start for those
whose process is gone while no agent ran. A container's runtime directory is never touched
here: its poststop hook removes it.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import stat
from collections.abc import Callable, Collection

import psutil

__all__ = ["PREFIX", "is_exec_dir", "owner_pid", "sweep"]

log = logging.getLogger(__name__)
PREFIX = "exec-"


def is_exec_dir(path: str, exec_dir: str) -> bool:
    """Whether ``path`` is a runtime directory ``radium exec`` made in ``exec_dir``."""
    parent, name = os.path.split(os.path.normpath(path))
    return parent == os.path.normpath(exec_dir) and name.startswith(PREFIX)


def owner_pid(name: str, host: str) -> int | None:
    """The pid of the ``radium exec`` that made directory ``name`` on ``host``, if it is one."""
    head, _, rest = name.rpartition("-")  # rest: the random part
    head, _, pid = head.rpartition("-")
    if head != f"{PREFIX}{host}" or not pid.isdigit() or not rest:
        return None
    return int(pid)


def sweep(
    exec_dir: str,
    held: Collection[str],
    alive: Callable[[int], bool] = psutil.pid_exists,
) -> list[str]:
    """Remove the exec directories no lease in ``held`` (runtime directories) covers and
    whose ``radium exec`` is gone; those removed."""
    try:
        names = os.listdir(exec_dir)
    except OSError:
        return []
    host, kept = socket.gethostname(), {os.path.normpath(p) for p in held}
    removed = []
    for name in names:
        path = os.path.join(exec_dir, name)
        pid = owner_pid(name, host)
        if pid is None or path in kept or alive(pid) or not _real_dir(path):
            continue  # a live exec may not have its lease yet: never swept
        shutil.rmtree(path, ignore_errors=True)  # a symlink there is refused, not followed
        log.info("removed %s: its radium exec (pid %d) is gone", path, pid)
        removed.append(path)
    return removed


def _real_dir(path: str) -> bool:
    """A directory itself, not a link to one (never followed)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False
