"""This program's files, served to remote code that opens them (docs/remoting.md, "Files").

The worker asks, in a call back, to ``open`` a path (relative to this process's working
directory) in a binary mode, then to ``read``, ``write``, ``seek``... it in chunks. Only these
file methods can be asked for, with plain arguments; the file is closed when the worker closes
it (or this process ends).
"""

from __future__ import annotations

import threading
from typing import Any, BinaryIO, Dict, List

from radium_interposer.client import state

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
