"""Containers' runtime directories on the host, each reachable only by its own container's user.

A runtime directory holds the container's data-plane socket (``dp.sock``): whoever connects to
it runs code in the container's lease, and through the container's own file service reads and
writes what the container's program may. So (docs/security.md, "other local users"):

- the parent (``hook.state_dir``) is root's and 0700: no other host user reaches any of them;
- each container's directory is ``root:<the container's gid>`` 0750, and the broker makes the
  socket the same group's, 0660 (the gid of the container's process as the host sees it,
  through its user namespace's mappings): the container's user reaches it through the
  read-only bind mount at ``/run/radium``, and no other host user does.

Light on imports: it runs on every container start.
"""

from __future__ import annotations

import os
import stat

from radium.errors import SpecError

# Not typing.TYPE_CHECKING: importing typing costs milliseconds on every container start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Mapping, Sequence

__all__ = ["container_owner", "make", "make_private_parent"]

PARENT_MODE = 0o700
DIR_MODE = 0o750


def _host_id(inside: int, mappings: object, what: str) -> int:
    """``inside`` (an id in the container) as the host sees it; itself without mappings."""
    if not isinstance(mappings, list) or not mappings:
        return inside
    for mapping in mappings:
        if not isinstance(mapping, dict):
            continue
        first, host, size = (mapping.get(k) for k in ("containerID", "hostID", "size"))
        if not all(isinstance(v, int) and v >= 0 for v in (first, host, size)):
            continue
        assert isinstance(first, int) and isinstance(host, int) and isinstance(size, int)
        if first <= inside < first + size:
            return host + inside - first
    raise SpecError(
        f"the container's {what} {inside} is not in its user namespace's {what} mappings",
        hint="fix linux.uidMappings/gidMappings in the container's spec",
    )


def container_owner(spec: Mapping[str, Any]) -> tuple[int, int]:
    """The host uid and gid of the container's process (``process.user``, mapped)."""
    process = spec.get("process")
    user = process.get("user") if isinstance(process, dict) else None
    user = user if isinstance(user, dict) else {}
    uid, gid = user.get("uid", 0), user.get("gid", 0)
    if not (isinstance(uid, int) and isinstance(gid, int) and uid >= 0 and gid >= 0):
        raise SpecError(f"process.user in the container's spec is malformed: {user!r}")
    linux = spec.get("linux")
    linux = linux if isinstance(linux, dict) else {}
    return (
        _host_id(uid, linux.get("uidMappings"), "uid"),
        _host_id(gid, linux.get("gidMappings"), "gid"),
    )


def _ours(path: str, info: os.stat_result) -> None:
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        kind = "directory" if stat.S_ISDIR(info.st_mode) else "not a directory"
        raise SpecError(
            f"{path} ({kind}, owner uid {info.st_uid}) is not a directory of uid "
            f"{os.geteuid()}: another user may have made it",
            hint=f"remove {path} (Radium makes it again), or point hook.state_dir elsewhere",
        )


def make_private_parent(parent: str) -> None:
    """``parent`` as a directory of ours, 0700 (an older install's 0755 one is tightened)."""
    try:
        os.mkdir(parent, PARENT_MODE)
    except FileExistsError:
        pass
    except FileNotFoundError:
        os.makedirs(parent, PARENT_MODE, exist_ok=True)
    info = os.lstat(parent)
    _ours(parent, info)
    if stat.S_IMODE(info.st_mode) != PARENT_MODE:
        os.chmod(parent, PARENT_MODE)


def make(parent: str, name: str, owner: Sequence[int]) -> str:
    """``parent/name``, ``root:<owner's gid>`` 0750, in a private ``parent``; its path."""
    make_private_parent(parent)
    path = os.path.join(parent, name)
    if not os.path.lexists(path):
        os.mkdir(path, DIR_MODE)
    _ours(path, os.lstat(path))
    os.chown(path, -1, owner[1], follow_symlinks=False)
    os.chmod(path, DIR_MODE)
    return path
