"""Resolve paths inside an untrusted container rootfs without ever leaving it.

Every component is opened relative to its parent directory with ``O_PATH | O_NOFOLLOW``; a symlink
is read and re-walked *inside* the rootfs (an absolute target restarts at the rootfs, ``..`` stops
at it), the way ``filepath-securejoin`` and runc do. The result is a file descriptor, so a later
rename in the rootfs cannot redirect us: callers mount onto or read from ``/proc/self/fd/N``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections import deque
from pathlib import Path
from typing import Iterator, Literal

from radium.errors import RootfsError, UnsafePathError

__all__ = [
    "MAX_SYMLINKS",
    "Create",
    "exists",
    "fd_path",
    "list_dir",
    "open_in_root",
    "open_root",
    "opened",
    "read_text",
    "real_path",
]

MAX_SYMLINKS = 40
_OPEN_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC

Create = Literal["none", "dir", "file"]


def open_root(rootfs: Path) -> int:
    """An ``O_PATH`` descriptor of the rootfs directory itself."""
    try:
        fd = os.open(rootfs, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError as exc:
        raise RootfsError(
            f"container rootfs {rootfs} does not exist",
            hint="check root.path in the bundle's config.json",
        ) from exc
    except NotADirectoryError as exc:
        raise RootfsError(f"container rootfs {rootfs} is not a directory") from exc
    return fd


def fd_path(fd: int) -> str:
    """The magic-link path through which the kernel reaches exactly this descriptor."""
    return f"/proc/self/fd/{fd}"


def open_in_root(root_fd: int, path: str, *, create: Create = "none") -> int:
    """Open ``path`` (absolute or relative, as seen inside the container) with O_PATH.

    With ``create``, missing components are made as directories inside the rootfs, and a missing
    final component as a directory or an empty regular file. Raises FileNotFoundError when
    ``path`` does not exist and nothing is to be created.
    """
    stack = [os.dup(root_fd)]
    pending = deque(p for p in path.split("/") if p not in ("", "."))
    links = 0
    try:
        while pending:
            name = pending.popleft()
            if name == "..":
                if len(stack) > 1:
                    os.close(stack.pop())
                continue
            last = not pending
            fd = _open_child(
                stack[-1], name, create=create if last else ("dir" if create != "none" else "none")
            )
            mode = os.fstat(fd).st_mode
            if stat.S_ISLNK(mode):
                os.close(fd)
                links += 1
                if links > MAX_SYMLINKS:
                    raise UnsafePathError(
                        f"too many symbolic links resolving {path!r} in the rootfs"
                    )
                target = os.readlink(name, dir_fd=stack[-1])
                if target.startswith("/"):
                    while len(stack) > 1:
                        os.close(stack.pop())
                pending.extendleft(reversed([p for p in target.split("/") if p not in ("", ".")]))
                continue
            if not last and not stat.S_ISDIR(mode):
                os.close(fd)
                raise UnsafePathError(f"{path!r} in the rootfs: {name!r} is not a directory")
            stack.append(fd)
        return stack.pop()
    finally:
        for fd in stack:
            os.close(fd)


def _open_child(parent_fd: int, name: str, *, create: Create) -> int:
    try:
        return os.open(name, _OPEN_FLAGS, dir_fd=parent_fd)
    except FileNotFoundError:
        if create == "none":
            raise
    # A racing creator may win between our open and mkdir; both outcomes are fine.
    with contextlib.suppress(FileExistsError):
        if create == "dir":
            os.mkdir(name, 0o755, dir_fd=parent_fd)
        else:
            os.close(
                os.open(
                    name,
                    os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                    0o644,
                    dir_fd=parent_fd,
                )
            )
    return os.open(name, _OPEN_FLAGS, dir_fd=parent_fd)


@contextlib.contextmanager
def opened(root_fd: int, path: str, *, create: Create = "none") -> Iterator[int]:
    """Context-managed :func:`open_in_root`."""
    fd = open_in_root(root_fd, path, create=create)
    try:
        yield fd
    finally:
        os.close(fd)


def exists(root_fd: int, path: str, *, kind: Literal["dir", "file", "any"] = "any") -> bool:
    """Whether ``path`` resolves inside the rootfs to an existing file of that kind."""
    try:
        with opened(root_fd, path) as fd:
            mode = os.fstat(fd).st_mode
    except (FileNotFoundError, NotADirectoryError, UnsafePathError):
        return False
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.ELOOP):
            return False
        raise
    if kind == "dir":
        return stat.S_ISDIR(mode)
    if kind == "file":
        return stat.S_ISREG(mode)
    return True


def read_text(root_fd: int, path: str, *, limit: int = 64 * 1024) -> str | None:
    """The text of a regular file inside the rootfs (at most ``limit`` bytes), or None."""
    try:
        with opened(root_fd, path) as pfd:
            if not stat.S_ISREG(os.fstat(pfd).st_mode):
                return None
            fd = os.open(fd_path(pfd), os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except (FileNotFoundError, NotADirectoryError, UnsafePathError, PermissionError):
        return None
    try:
        return os.read(fd, limit).decode("utf-8", "replace")
    finally:
        os.close(fd)


def list_dir(root_fd: int, path: str) -> list[str]:
    """Entry names of a directory inside the rootfs; empty when it is missing or not a dir."""
    try:
        with opened(root_fd, path) as pfd:
            if not stat.S_ISDIR(os.fstat(pfd).st_mode):
                return []
            fd = os.open(fd_path(pfd), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError, UnsafePathError, PermissionError):
        return []
    try:
        return os.listdir(fd)
    finally:
        os.close(fd)


def real_path(root_fd: int, path: str) -> str:
    """The canonical in-container path that ``path`` resolves to (for logs and reports)."""
    with opened(root_fd, path) as fd:
        host = os.readlink(fd_path(fd))
    root_host = os.readlink(fd_path(root_fd))
    if host == root_host:
        return "/"
    if not host.startswith(root_host.rstrip("/") + "/"):
        raise UnsafePathError(f"{path!r} resolved outside the rootfs")
    return host[len(root_host.rstrip("/")) :]
