"""This program's files, served to remote code that opens them (docs/remoting.md, "Files").

``fs`` requests are the few ``os`` calls remote code makes on this program's paths (``stat``
for ``os.path.exists``, ``listdir``, ``mkdir`` for ``os.makedirs``, ``remove``, ``rename``).

The worker asks, in a call back, to ``open`` a path (relative to this process's working
directory) in a binary mode, then to ``read``, ``write``, ``seek``... it in chunks. Only these
file methods can be asked for, with plain arguments; the file is closed when the worker closes
it (or this process ends).
"""

from __future__ import annotations

import os
import threading
from typing import Any, BinaryIO, Dict, List

from radium_interposer.client import state

__all__ = ["MAX_READ", "open_file", "use_file", "use_fs"]

_files: Dict[int, BinaryIO] = {}
_lock = threading.Lock()
_MODES = frozenset(("rb", "wb", "ab", "xb", "r+b", "w+b", "a+b", "x+b"))
_METHODS = frozenset(("read", "write", "seek", "tell", "truncate", "flush", "close", "seekable"))
#: The most one ``read`` may ask for (the worker asks for at most 8 MiB).
MAX_READ = 64 << 20


def open_file(meta: Dict[str, Any]) -> int:
    """Open ``path`` in ``mode`` for the worker; the file's id."""
    path, mode = meta.get("path"), meta.get("mode")
    if not isinstance(path, str) or not path or "\0" in path:
        raise ValueError("open: path must be a non-empty string")
    if mode not in _MODES:
        raise ValueError(f"open: mode {mode!r} is not a binary file mode")
    handle: BinaryIO = open(path, mode)  # noqa: SIM115 - closed by the worker's close
    file_id = state.new_id()
    with _lock:
        _files[file_id] = handle
    return file_id


_FS = {"stat": 2, "listdir": 1, "mkdir": 2, "remove": 1, "rename": 2, "replace": 2}


def use_fs(meta: Dict[str, Any]) -> Any:
    """``os.stat``, ``listdir``, ``mkdir``, ``remove``, ``rename``, ``replace`` of a path here."""
    method, args = meta.get("m"), meta.get("a")
    if method not in _FS or not isinstance(args, list) or len(args) != _FS[str(method)]:
        raise ValueError(f"fs: {method!r} is not a filesystem call this side serves")
    path = args[0]
    if not isinstance(path, str) or not path or "\0" in path:
        raise ValueError("fs: the path must be a non-empty string")
    if method == "stat":
        info = os.stat(path, follow_symlinks=bool(args[1]))
        return [list(info[:10]), {k: getattr(info, k) for k in _TIMES}]
    if method == "listdir":
        return os.listdir(path)
    if method == "mkdir":
        if not isinstance(args[1], int):
            raise ValueError("fs mkdir: the mode must be an integer")
        return os.mkdir(path, args[1] & 0o777)
    if method == "remove":
        return os.remove(path)
    if not isinstance(args[1], str) or not args[1] or "\0" in args[1]:
        raise ValueError(f"fs {method}: the destination must be a non-empty string")
    return getattr(os, str(method))(path, args[1])


_TIMES = ("st_atime", "st_mtime", "st_ctime", "st_atime_ns", "st_mtime_ns", "st_ctime_ns")


def use_file(meta: Dict[str, Any], buffers: List[Any]) -> Any:
    """Run one method of an open file for the worker."""
    file_id = meta.get("f")
    with _lock:
        handle = _files.get(file_id) if isinstance(file_id, int) else None
    method, args = meta.get("m"), meta.get("a", [])
    if handle is None:
        raise LookupError(f"no open file {meta.get('f')!r}")
    if method not in _METHODS or not isinstance(args, list):
        raise ValueError(f"file: {method!r} is not a file method this side serves")
    if method == "write":
        if len(args) != 1 or not isinstance(args[0], dict) or args[0].get("i") != 0 or not buffers:
            raise ValueError("file write: the data must be buffer 0")
        return handle.write(buffers[0])
    if not all(arg is None or isinstance(arg, int) for arg in args) or len(args) > 2:
        raise ValueError(f"file {method}: arguments must be integers")
    if method == "read" and (len(args) != 1 or not isinstance(args[0], int)):
        raise ValueError("file read: give the number of bytes")
    if method == "read":
        return handle.read(max(0, min(args[0], MAX_READ)))
    if method == "close":
        with _lock:
            _files.pop(int(file_id or 0), None)
    return getattr(handle, method)(*args)
