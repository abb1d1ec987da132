"""Mount system calls the hook needs, through libc: setns, bind mounts, unmounts.

Python's ``os`` has no mount(2) and no setns before 3.12, so these go through ctypes. Targets
are always ``/proc/self/fd/N`` paths of descriptors from :mod:`radium.hooks.safepath`.
"""

from __future__ import annotations

import ctypes
import os
from typing import Optional

from radium.errors import MountError

__all__ = [
    "CLONE_NEWNS",
    "MNT_DETACH",
    "MS_BIND",
    "MS_NODEV",
    "MS_NOEXEC",
    "MS_NOSUID",
    "MS_RDONLY",
    "MS_REMOUNT",
    "bind",
    "enter_mount_namespace",
    "remount",
    "unmount",
]

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MNT_DETACH = 0x2
CLONE_NEWNS = 0x00020000

_libc: Optional[ctypes.CDLL] = None


def _lib() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        # The interpreter's own global symbols include libc's (glibc or musl): no lookup, and
        # no `ldconfig -p` fork, which ctypes.util.find_library runs on every hook call.
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise MountError(f"{what}: {os.strerror(err)}")


def enter_mount_namespace(pid: int) -> None:
    """Join the mount namespace of process ``pid`` (the container's init)."""
    try:
        fd = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise MountError(
            f"cannot open the mount namespace of container process {pid}: {exc.strerror}",
            hint="the container exited before its prestart hook ran",
        ) from exc
    try:
        _check(_lib().setns(fd, CLONE_NEWNS), f"cannot enter the mount namespace of process {pid}")
    finally:
        os.close(fd)


def bind(source: str, target: str) -> None:
    """Bind-mount ``source`` onto ``target``; :func:`remount` then applies the flags."""
    _check(
        _lib().mount(source.encode(), target.encode(), None, MS_BIND, None),
        f"cannot bind-mount {source}",
    )


def remount(target: str, flags: int) -> None:
    """Apply read-only/nosuid/nodev/noexec ``flags`` to the bind mount at ``target``."""
    _check(
        _lib().mount(None, target.encode(), None, MS_REMOUNT | MS_BIND | flags, None),
        "cannot remount read-only",
    )


def unmount(target: str) -> None:
    """Lazily unmount ``target``."""
    _check(_lib().umount2(target.encode(), MNT_DETACH), f"cannot unmount {target}")
