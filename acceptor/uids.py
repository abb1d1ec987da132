"""Worker uids, unique on the whole host: one lock file per uid, held while its lease lives.

Every acceptor on a host draws its workers' uids from the same range
(``acceptor.sandbox.uid_min..uid_max``), so a uid is taken by ``flock`` on
``<acceptor.sandbox.uid_lock_dir>/<uid>.lock`` (root's only, 0700), held through this process's
open file for as long as the lease's slot lives: another acceptor (or another :class:`UidLocks`
of this process: ``flock`` belongs to the open file, not the process) skips a locked uid, and
the kernel drops the lock when the acceptor exits, however it exits. A uid that a process of
the host still runs as (a container-mode worker an acceptor left when it died, a rootless
container's subordinate uid, a local user) is skipped as well. Lock files are never removed:
unlinking one could let two openers lock two different files of one name. Each is empty; the
range bounds how many there are.

A *group* shares one uid among its leases: the fractional leases of one GPU, whose MPS server
serves one uid at a time (:mod:`radium.acceptor.gpu_sharing`). Its uid is taken by its first
lease, counted, and goes back to the host with its last (docs/security.md, the trade-off).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

from radium.errors import SandboxError

__all__ = ["HINT", "UidLocks"]

log = logging.getLogger(__name__)
HINT = "set acceptor.sandbox.uid_lock_dir to a directory only root can write"


class UidLocks:
    """The uids this acceptor holds, each locked host-wide, from ``first..last``."""

    def __init__(self, directory: str, first: int, last: int) -> None:
        self.first, self.last = first, last
        self.directory = _lock_dir(directory)
        self.held: dict[int, int] = {}  # uid -> its locked lock file (guarded by lock)
        #: group -> its shared uid, and each shared uid's leases (guarded by lock)
        self.groups: dict[str, int] = {}
        self.users: dict[int, int] = {}
        self.lock = threading.Lock()

    def take(self, group: str = "") -> int:
        """The lowest uid of the range no acceptor holds and no process of the host runs as,
        locked for this acceptor until :meth:`release`; a ``group``'s uid when it has one
        (one more lease counted on it)."""
        with self.lock:
            if group in self.groups:
                return self._join(group, self.groups[group])
        busy = _host_uids()
        with self.lock:
            if group in self.groups:  # taken by another lease of the group meanwhile
                return self._join(group, self.groups[group])
            for uid in range(self.first, self.last + 1):
                if uid not in busy and uid not in self.held and self._lock(uid):
                    return self._join(group, uid) if group else uid
        raise SandboxError(
            f"every worker uid of {self.first}..{self.last} is in use on this host",
            hint="widen acceptor.sandbox.uid_min/uid_max (shared by every acceptor on the host)",
        )

    def _join(self, group: str, uid: int) -> int:
        """Count one more lease on the group's uid (under ``self.lock``)."""
        self.groups[group] = uid
        self.users[uid] = self.users.get(uid, 0) + 1
        return uid

    def sharing(self, uid: int) -> int:
        """How many leases share ``uid`` (0: it is no group's)."""
        with self.lock:
            return self.users.get(uid, 0)

    def keep_for(self, uid: int, home: Path, group: str = "") -> int:
        """The uid of a slot kept from before a restart, locked again: ``uid`` itself, or a
        free one (the files of the lease's ``home`` given to it) when another acceptor took
        ``uid`` while this one was down, or when it is 0 (a slot made with the sandbox off);
        for a ``group``'s lease, the uid the group has now if it has one."""
        if uid:
            with self.lock:
                if not group and (uid in self.held or self._lock(uid)):
                    return uid
                if group and self.groups.get(group) == uid:
                    return self._join(group, uid)
                free = group not in self.groups and uid not in self.held
                if group and free and self._lock(uid):
                    return self._join(group, uid)
        new = self.take(group)  # the group's uid now, if it has one: the files go to it
        for path in [home, *_tree(home)]:
            with contextlib.suppress(FileNotFoundError):
                if os.lstat(path).st_uid == uid:
                    os.lchown(path, new, new)
        log.warning("worker uid %d of %s is held by another acceptor; it now has %d", uid,
                    home.parent.name, new)  # fmt: skip
        return new

    def _lock(self, uid: int) -> bool:
        """Lock ``uid``'s file (under ``self.lock``); False when another open file holds it."""
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(f"{uid}.lock", flags, 0o600, dir_fd=self.directory)
        except OSError as exc:
            raise SandboxError(f"cannot open worker uid {uid}'s lock: {exc}", hint=HINT) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return False
            raise SandboxError(f"cannot lock worker uid {uid}: {exc}", hint=HINT) from exc
        self.held[uid] = fd
        return True

    def release(self, uid: int) -> bool:
        """Give ``uid`` back to the host (its lease's processes are all gone); a group's uid
        only with its last lease. True when it went back."""
        with self.lock:
            if uid in self.users:
                self.users[uid] -= 1
                if self.users[uid] > 0:
                    return False
                del self.users[uid]
                for group in [g for g, u in self.groups.items() if u == uid]:
                    del self.groups[group]
            fd = self.held.pop(uid, None)
        if fd is not None:
            os.close(fd)  # the last reference to the open file: the flock goes with it
        return fd is not None

    def close(self) -> None:
        """Release every uid and the directory (tests; the process's exit does the same)."""
        with self.lock:
            held, self.held = list(self.held.values()), {}
        for fd in held:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.close(self.directory)


def _lock_dir(path: str) -> int:
    """The lock directory, opened (made 0700 if missing); refused unless this process's user
    owns it and nobody else may write it: a lock file another user can make or replace would
    let them hold every uid, or hand two acceptors the same one."""
    with contextlib.suppress(FileExistsError):
        os.makedirs(path, mode=0o700)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise SandboxError(f"cannot open the uid lock directory {path}: {exc}", hint=HINT) from exc
    info = os.fstat(fd)
    if info.st_uid != os.geteuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        os.close(fd)
        raise SandboxError(
            f"refusing the uid lock directory {path}: owned by uid {info.st_uid} with mode "
            f"{stat.S_IMODE(info.st_mode):o}, not this acceptor's user's alone",
            hint=HINT,
        )
    return fd


def _host_uids() -> set[int]:
    """The uid each process of this host runs as, as ``/proc`` shows it (the owner of
    ``/proc/PID``: its effective uid; root for a process that made itself undumpable). A stat
    per process, not a read of its status: 0.4 ms for 100 processes against 6 to 12."""
    busy: set[int] = set()
    with os.scandir("/proc") as entries:
        for entry in entries:
            if entry.name.isdigit():
                with contextlib.suppress(OSError):  # gone since
                    busy.add(entry.stat(follow_symlinks=False).st_uid)
    return busy


def _tree(top: Path) -> Iterator[Path]:
    """Everything under ``top``, never following a link."""
    for directory, subdirectories, files in os.walk(top):
        for name in [*subdirectories, *files]:
            yield Path(directory) / name
