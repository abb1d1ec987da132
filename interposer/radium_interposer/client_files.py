"""The client program's files, opened by remote code on the worker (docs/remoting.md, "Files").

``torch.save(model.state_dict(), "ckpt.pt")`` or ``open("data.csv")`` in remote code must read
and write the client's file, never a scratch file on the acceptor that vanishes with the lease.
The worker's ``open`` (``builtins.open`` and ``io.open``) sends the client's paths to the client:
the file is opened there and read or written through the connection in chunks of at most
``CHUNK`` bytes, so a large file is streamed, never held whole. Libraries that open paths another
way (torch's zip writer opens by name in C++, numpy's text readers look for the file first) are
adapted when they are imported.

A path is the client's when it is relative (to the client's working directory), or absolute and
outside the worker's own system areas (its Python, ``/usr``, ``/proc``, ``/tmp``, the lease's
directory...). A relative path opened where no call of the client runs is refused rather than
written on the acceptor.
"""

from __future__ import annotations

import builtins
import io
import os
import sys
import sysconfig
from typing import Any, Callable, Dict, List, Optional, Tuple

from radium_interposer import codec, ops
from radium_interposer.tags import BYTES

__all__ = [
    "BUFFER",
    "CHUNK",
    "CallClient",
    "ClientFile",
    "ask",
    "connect",
    "current_cwd",
    "is_client_path",
    "open_client_or_local",
    "set_client_cwd",
]

#: The most one read or write moves through the connection.
CHUNK = 8 << 20
#: Buffer size of the buffered file over a client file (one round trip per buffer).
BUFFER = 1 << 20
_real_open = builtins.open
_real_getcwd = os.getcwd
#: The client program's working directory (its calls say; remote code sees it as its own).
_client_cwd: Optional[str] = None
#: Absolute paths under these stay the worker's own.
_SYSTEM = ("/proc", "/sys", "/dev", "/etc", "/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin",
           "/tmp", "/var", "/run", "/opt", "/lease")  # fmt: skip
#: ``(meta, buffers) -> (reply meta, buffers)``: a call to the client of the running call.
CallClient = Callable[[Dict[str, Any], List[Any]], Tuple[Dict[str, Any], List[Any]]]
_call: Optional[CallClient] = None


def connect(call: CallClient) -> None:
    """How this worker calls the client whose call is running (set once, by the worker)."""
    global _call
    _call = call


def ask(meta: Dict[str, Any], buffers: Optional[List[Any]] = None) -> Any:
    """A file request to the client: its answer, decoded (bytes, a stat's fields and times)."""
    if _call is None:
        raise PermissionError("this worker cannot reach its client's files")
    reply, received = _call(meta, buffers or [])
    return codec.decode(reply.get("v"), received, _no_references)


def _no_references(node: Dict[str, Any]) -> Any:
    raise ValueError("a file answer holds values only, not references")


#: The worker's own import path as it started (its ``PYTHONPATH``, site dirs), and where this
#: package itself lies (an editable install or a checkout is on no such path): its libraries
#: are never the client's, or every import probe there, and every line of a traceback through
#: the worker's own frames, would ask the client.
_OWN_PATH = (*sys.path, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _local_roots() -> Tuple[str, ...]:
    roots = set(_SYSTEM)
    roots.update((sys.prefix, sys.base_prefix, sys.exec_prefix, _real_getcwd()), _OWN_PATH)
    roots.update(sysconfig.get_paths().values())
    # Never "/" itself (a cwd of "/" would make every path the worker's).
    roots = {root.rstrip("/") for root in roots if root.startswith("/")} - {""}
    return tuple(sorted(root + "/" for root in roots))


_roots: Tuple[str, ...] = ()


def is_client_path(file: Any) -> bool:
    """Whether remote code naming ``file`` means a file of the client program."""
    global _roots
    if isinstance(file, os.PathLike):
        file = os.fspath(file)
    if not isinstance(file, str) or not file or "://" in file:
        return False
    if not file.startswith("/"):
        return True
    if _client_cwd and _client_cwd != "/" and (file + "/").startswith(_client_cwd + "/"):
        return True  # os.path.abspath("ckpt.pt") in remote code: still the client's
    if not _roots:
        _roots = _local_roots()
    return not (file + "/").startswith(_roots)


class ClientFile(io.RawIOBase):
    """A file of the client, opened there; reads and writes go through the connection."""

    def __init__(self, path: str, mode: str) -> None:
        super().__init__()
        self.name, self.mode = path, mode
        self._id = ask({"op": ops.OPEN, "path": path, "mode": mode})

    def _method(self, method: str, *args: Any, data: Any = None) -> Any:
        """``method(*args)`` on the client's file; ``data`` (a write's bytes) as buffer 0."""
        buffers = None
        if data is not None:
            args, buffers = ({"$": BYTES, "i": 0},), [data]
        return ask({"op": ops.FILE, "f": self._id, "m": method, "a": list(args)}, buffers)

    def readable(self) -> bool:
        return "r" in self.mode or "+" in self.mode

    def writable(self) -> bool:
        return any(c in self.mode for c in "wax+")

    def seekable(self) -> bool:
        return bool(self._method("seekable"))

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self._method("read", min(len(view), CHUNK))
        view[: len(data)] = data
        return len(data)

    def write(self, data: Any) -> int:
        written: int = self._method("write", data=memoryview(data).cast("B")[:CHUNK])
        return written

    def seek(self, offset: int, whence: int = 0) -> int:
        position: int = self._method("seek", offset, whence)
        return position

    def tell(self) -> int:
        position: int = self._method("tell")
        return position

    def truncate(self, size: Optional[int] = None) -> int:
        result: int = self._method("truncate", size)
        return result

    def close(self) -> None:
        if not self.closed and hasattr(self, "_id"):
            try:
                self._method("close")
            finally:
                super().close()


def open_client_or_local(
    file: Any,
    mode: str = "r",
    buffering: int = -1,
    encoding: Optional[str] = None,
    errors: Optional[str] = None,
    newline: Optional[str] = None,
    closefd: bool = True,
    opener: Any = None,
) -> Any:
    """``open`` on the worker: the client's paths are the client's files."""
    if opener is not None or not is_client_path(file):
        return _real_open(file, mode, buffering, encoding, errors, newline, closefd, opener)
    binary = "b" in mode
    raw = ClientFile(os.fspath(file), "".join(c for c in mode if c in "rwax+") + "b")
    if buffering == 0 and binary:
        return raw
    size = BUFFER if buffering in (-1, 1) else buffering
    buffered: Any
    if "+" in mode:
        buffered = io.BufferedRandom(raw, size)
    elif raw.writable():
        buffered = io.BufferedWriter(raw, size)
    else:
        buffered = io.BufferedReader(raw, size)
    if binary:
        return buffered
    return io.TextIOWrapper(buffered, encoding, errors, newline, line_buffering=buffering == 1)


def set_client_cwd(path: Any) -> None:
    """The client's working directory, as its call says."""
    global _client_cwd
    if not isinstance(path, str) or not path.startswith("/") or "\0" in path:
        raise ValueError("cwd must be an absolute path")
    _client_cwd = path.rstrip("/") or "/"


def current_cwd() -> str:
    """``os.getcwd()`` on the worker: the client's working directory once a call said it."""
    return _client_cwd or _real_getcwd()
