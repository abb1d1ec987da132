"""A state directory that no other local user can read, replace or redirect.

``radium up`` keeps its tokens in a directory the user may name (``--state-dir``), often under
``/tmp``. Another local user could create that directory first, with ``config.toml`` a symbolic
link to a file of theirs, and receive the tokens when root writes them. So the directory is
reached one component at a time, each opened without following a link, and refused unless it
is the effective user's, writable by no one else, and under directories that only root or that
user (or a sticky bit) control; every file in it is then opened through the directory's
descriptor, never through a link, and a secret is written to a new file and renamed into place.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from radium.errors import UnsafeStateDirError

__all__ = ["MAX_LINKS", "StateDir", "default_up_dir", "open_state_dir", "up_config"]

#: Symbolic links followed on the way to a state directory before giving up (as the kernel).
MAX_LINKS = 40
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _who(uid: int) -> str:
    return "root" if uid == 0 else f"you (uid {uid})"


class StateDir:
    """An open state directory: :attr:`path` as the user named it, and a descriptor through
    which every file in it is opened (never through a symbolic link)."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self.fd = fd

    def __enter__(self) -> StateDir:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the directory's descriptor."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def open(self, name: str, flags: int, mode: int = 0o600) -> int:
        """A descriptor of ``name`` in the directory; a symbolic link there is refused."""
        try:
            return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=self.fd)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            raise UnsafeStateDirError(
                f"{self.path / name} is a symbolic link",
                hint=f"remove it, or choose another --state-dir than {self.path}",
            ) from exc

    def read(self, name: str) -> bytes | None:
        """The bytes of the regular file ``name``, or None when there is none."""
        try:
            fd = self.open(name, os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            return None
        with os.fdopen(fd, "rb") as file:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise UnsafeStateDirError(
                    f"{self.path / name} is not a regular file",
                    hint=f"remove it, or choose another --state-dir than {self.path}",
                )
            return file.read()

    def write(self, name: str, data: bytes) -> None:
        """Replace ``name`` with ``data`` (mode 0600): written to a new file, then renamed over
        whatever ``name`` was, so a link there is replaced rather than written through."""
        temporary = f".{name}.{secrets.token_hex(8)}"
        fd = self.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(data)
            os.rename(temporary, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            os.unlink(temporary, dir_fd=self.fd)
            raise

    def unlink(self, name: str) -> None:
        """Remove ``name`` if it is there."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self.fd)


def open_state_dir(path: Path, create: bool, setting: str = "--state-dir") -> StateDir:
    """``path``, checked (and made 0700, and created when ``create``): FileNotFoundError when
    it is absent and not to be created; :class:`UnsafeStateDirError` when another user could
    read, replace or redirect what is written in it (its hint: choose another ``setting``)."""
    walk = _Walk(path, os.geteuid(), setting)
    try:
        return _walk(walk, create)
    except (FileNotFoundError, UnsafeStateDirError):
        raise
    except OSError as exc:
        raise walk.refused(f"cannot open state directory {path}: {exc.strerror}") from exc


@dataclass(frozen=True)
class _Walk:
    """The directory asked for, by whom, and the setting that names it (for the hints)."""

    given: Path
    euid: int
    setting: str

    def refused(self, what: str, remove: bool = False) -> UnsafeStateDirError:
        instead = f"choose another {self.setting}"
        return UnsafeStateDirError(what, hint=f"remove it or {instead}" if remove else instead)


def _walk(walk: _Walk, create: bool) -> StateDir:
    """Each directory from the root to the one asked for opened in turn, never through a link
    (one on the way is read and the walk begins again from the root), and checked."""
    parts = [part for part in os.path.abspath(walk.given).split("/") if part]
    where, fd, links = "/", os.open("/", _DIRECTORY), 0
    try:
        _check_parent(fd, "/", walk)
        while parts:
            name = parts[0]
            try:
                child = os.open(name, _DIRECTORY, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                _make(fd, name, last=len(parts) == 1)
                continue
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                links += 1
                target = _link(fd, where, name, len(parts) == 1, walk, links)
                # Walked again from the root: each directory on the way is checked anew.
                parts = [part for part in target.split("/") if part] + parts[1:]
                os.close(fd)
                where, fd = "/", os.open("/", _DIRECTORY)
                continue
            os.close(fd)
            fd, where, parts = child, os.path.join(where, name), parts[1:]
            if parts:
                _check_parent(fd, where, walk)
        _check_own(fd, walk)
    except BaseException:
        os.close(fd)
        raise
    return StateDir(walk.given, fd)


def _make(fd: int, name: str, last: bool) -> None:
    """Create a missing directory on the way: the state directory itself 0700."""
    # One made meanwhile is opened and checked next, as any other.
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, 0o700 if last else 0o755, dir_fd=fd)


def _link(fd: int, where: str, name: str, last: bool, walk: _Walk, links: int) -> str:
    """Where the symbolic link ``name`` in ``where`` leads (absolute), if it may be followed:
    never the state directory itself, only a link of root's or ours (its directory is checked
    already, so no one else can replace it), and not more than :data:`MAX_LINKS` of them."""
    here, given = os.path.join(where, name), walk.given
    info = os.stat(name, dir_fd=fd, follow_symlinks=False)
    if not stat.S_ISLNK(info.st_mode):
        raise walk.refused(f"state directory {given}: {here} is not a directory")
    if last:
        raise walk.refused(
            f"state directory {given} is a symbolic link (to {os.readlink(name, dir_fd=fd)})",
            remove=True,
        )
    if info.st_uid not in (0, walk.euid):
        raise walk.refused(
            f"state directory {given}: the link {here} is owned by uid {info.st_uid}, who could "
            "point it elsewhere"
        )
    if links > MAX_LINKS:
        raise walk.refused(f"state directory {given}: more than {MAX_LINKS} links on the way")
    return os.path.normpath(os.path.join(where, os.readlink(name, dir_fd=fd)))


def _check_parent(fd: int, where: str, walk: _Walk) -> None:
    """A directory above the state directory: only root or we may own it, and only they may
    write it, unless its sticky bit keeps others from renaming what is not theirs (/tmp)."""
    info = os.fstat(fd)
    if info.st_uid not in (0, walk.euid):
        raise walk.refused(
            f"state directory {walk.given}: {where} is owned by uid {info.st_uid}, who could "
            "replace what is in it"
        )
    if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
        raise walk.refused(
            f"state directory {walk.given}: {where} is writable by other users (mode "
            f"{stat.S_IMODE(info.st_mode):04o}, not sticky), who could replace what is in it"
        )


def _check_own(fd: int, walk: _Walk) -> None:
    """The state directory itself: ours, and writable by no one else; then made 0700."""
    info = os.fstat(fd)
    if info.st_uid != walk.euid:
        raise walk.refused(
            f"state directory {walk.given} is owned by uid {info.st_uid}, not {_who(walk.euid)}",
            remove=True,
        )
    if info.st_mode & 0o022:
        raise walk.refused(
            f"state directory {walk.given} is writable by other users (mode "
            f"{stat.S_IMODE(info.st_mode):04o})",
            remove=True,
        )
    if info.st_mode & 0o077:
        os.fchmod(fd, 0o700)  # tokens, the pool's database, lease records


def default_up_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """Where ``radium up`` keeps its state when not told (``--state-dir``): root's under
    /var/lib, another user's under their XDG state directory."""
    if os.geteuid() == 0:
        return Path("/var/lib/radium/up")
    home = environ.get("HOME") or os.path.expanduser("~")
    return (
        Path(environ.get("XDG_STATE_HOME") or os.path.join(home, ".local", "state"))
        / "radium"
        / "up"
    )


def up_config(environ: Mapping[str, str] = os.environ) -> Path | None:
    """The config of this user's default ``radium up`` (:func:`default_up_dir`), when it has
    written one there and the directory is safe (ours, no one else may write it, and the
    file is a regular file, not a link); None otherwise."""
    try:
        with open_state_dir(default_up_dir(environ), create=False) as directory:
            fd = directory.open("config.toml", os.O_RDONLY | os.O_NONBLOCK)
            try:
                regular = stat.S_ISREG(os.fstat(fd).st_mode)
            finally:
                os.close(fd)
    except (OSError, UnsafeStateDirError):
        return None
    return directory.path / "config.toml" if regular else None
