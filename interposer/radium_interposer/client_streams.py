"""The client program's own file objects, on the worker (docs/remoting.md, "Your files and
array objects, passed by reference").

``np.save(f, a)`` with ``f = open(path, "wb")`` in the program: ``f`` crosses by reference
(``co``), and remote code gets a file-like object whose methods act on the program's very
file, through ``op: "fo"`` requests (docs/data-plane.md). Its position is the program's file's
position when a call returns, whatever was read or written.

Round trips are saved two ways, neither of which lets positions drift: writes after the first
(which says whether the file is writable) are gathered up to ``WRITE_BUFFER`` bytes, and small
reads and lines are served from a read-ahead of whole lines that the client remembers the
start of. Before any other method, and when the call ends (:func:`settle`, also before a
callback), the writes are sent and the client's file steps back to just after what was used.
"""

from __future__ import annotations

import collections
import io
import threading
from typing import Any, Deque, Dict, List, Optional

from radium_interposer import ops
from radium_interposer.client_files import CHUNK, ask
from radium_interposer.tags import BYTES

__all__ = ["AHEAD", "FIRST_AHEAD", "WRITE_BUFFER", "Stream", "settle"]

#: The most a text read-ahead asks for (whole lines: a little more at the end of one); a
#: binary one asks for up to ``CHUNK``.
AHEAD = 256 << 10
#: The first read-ahead, and the next after a step back (a callback per line, say): it doubles
#: with each one, so what is read ahead and not used is at most what was used.
FIRST_AHEAD = 16 << 10
#: Writes gathered before they are sent.
WRITE_BUFFER = 1 << 20
_local = threading.local()
#: Whether any client file object was ever used in this worker: until then a call's settle
#: (after every call) has nothing to look at, not even the thread's list.
_used = False


def settle() -> None:
    """Send the writes gathered and step back over the unread read-ahead, for every client file
    object this thread used: the program then sees its file where the local run leaves it."""
    if not _used:
        return
    dirty: Optional[List[Stream]] = getattr(_local, "dirty", None)
    if not dirty:  # the common case, after every call: nothing to do
        return
    _local.dirty = []
    for stream in dirty:
        stream._sync()


class Stream:
    """What the binary and text file objects (:mod:`client_file_objects`) share: the requests
    and the two buffers."""

    _empty: Any = b""

    def _setup(self, object_id: int, description: Dict[str, Any], release: Any) -> None:
        self._id, self._release = object_id, release
        self._about = description
        self._is_closed = bool(description.get("c"))
        self._can_ahead = bool(description.get("s")) and bool(description.get("r"))
        self._lines: Deque[Any] = collections.deque()  # the latest read-ahead's unread lines
        self._offset = 0  # into the first of them
        self._fetched = 0  # units (bytes or characters) the latest read-ahead brought
        self._ahead_size = FIRST_AHEAD
        self._pending: List[Any] = []
        self._pending_size = 0
        self._confirmed = False  # one write went through: the file is writable

    def _ask(self, method: str, *args: Any) -> Any:
        buffers = None
        if args and isinstance(args[0], (bytes, bytearray, memoryview)):
            args, buffers = ({"$": BYTES, "i": 0},), [args[0]]
        return ask({"op": ops.FILE_OBJECT, "f": self._id, "m": method, "a": list(args)}, buffers)

    def _dirty(self) -> None:
        global _used
        _used = True
        dirty = _local.__dict__.setdefault("dirty", [])
        if self not in dirty:
            dirty.append(self)

    # -- the two buffers -------------------------------------------------------------------
    def _unread(self) -> int:
        return sum(len(line) for line in self._lines) - self._offset

    def _step_back(self) -> Any:
        """The client's file to just after what was used of the read-ahead (its new tell)."""
        used = self._fetched - self._unread()
        self._lines, self._offset, self._fetched = collections.deque(), 0, 0
        self._ahead_size = FIRST_AHEAD
        return self._ask("back", used)

    def _send_writes(self) -> None:
        pending, self._pending, self._pending_size = self._pending, [], 0
        if pending:
            self._write_now(self._empty.join(pending))

    def _write_now(self, data: Any) -> None:
        for start in range(0, len(data), CHUNK):
            self._ask("write", data[start : start + CHUNK])

    def _sync(self) -> None:
        self._send_writes()
        if self._lines:
            self._step_back()

    def _fill(self, at_least: int = 0) -> bool:
        """A read-ahead, when the buffer is empty: False at the end of the file or when this
        file cannot step back (a pipe); then reads go straight to the file."""
        if not self._can_ahead:
            return False
        lines = self._ask("ahead", min(max(self._ahead_size, at_least), CHUNK))
        self._ahead_size = min(self._ahead_size * 2, AHEAD if self._empty == "" else CHUNK)
        if lines is None:
            self._can_ahead = False
            return False
        if isinstance(lines, bytes):  # binary: one piece, its lines found as they are read
            lines = [lines] if lines else []
        self._lines, self._offset = collections.deque(lines), 0
        self._fetched = sum(len(line) for line in self._lines)
        if self._lines:
            self._dirty()
        return bool(self._lines)

    def _take(self, limit: int, line: bool) -> List[Any]:
        """Up to ``limit`` units (all if < 0) of the read-ahead; with ``line``, to a line end."""
        parts: List[Any] = []
        size = 0
        while self._lines and (limit < 0 or size < limit):
            first = self._lines[0]
            end = len(first)  # a text piece is one line; a binary one holds many
            if line and isinstance(first, bytes) and first.find(b"\n", self._offset) >= 0:
                end = first.find(b"\n", self._offset) + 1
            if limit >= 0:
                end = min(end, self._offset + limit - size)
            piece = first[self._offset : end]
            parts.append(piece)
            size += len(piece)
            self._offset = end
            if end == len(first):
                self._lines.popleft()
                self._offset = 0
            binary = isinstance(first, bytes)
            ended = piece[-1:] == b"\n" if binary else end == len(first) and _ends_line(first)
            if line and ended:
                return [*parts, None]  # None: the line is complete
        return parts

    # -- reading ---------------------------------------------------------------------------
    def _readline(self, limit: Optional[int] = -1) -> Any:
        limit = -1 if limit is None else limit
        if limit < 0 and not self._offset and self._lines and not self._pending:
            first = self._lines[0]  # a text line, whole (most calls: iterating over lines)
            if isinstance(first, str) and _ends_line(first):
                return self._lines.popleft()
        self._send_writes()
        parts: List[Any] = []
        size = 0
        while limit < 0 or size < limit:
            if not self._lines and not self._fill():
                if not self._can_ahead:  # no read-ahead here: the client's own readline
                    rest = limit - size if limit >= 0 else -1
                    parts.append(self._ask("readline", rest if rest >= 0 else 1 << 26))
                break
            got = self._take(limit - size if limit >= 0 else -1, line=True)
            if got and got[-1] is None:
                parts.extend(got[:-1])
                break
            parts.extend(got)
            size += sum(len(p) for p in got)
        return self._empty.join(parts)

    def _read(self, size: Optional[int] = -1) -> Any:
        self._send_writes()
        size = -1 if size is None else size
        parts = self._take(size, line=False)
        got = sum(len(p) for p in parts)
        while size < 0 or got < size:
            want = CHUNK if size < 0 else min(size - got, CHUNK)
            if size >= 0 and not self._lines and self._fill(want):  # (all of it: no read-ahead)
                more = self._take(want, line=False)
            else:
                more = [self._ask("read", want)]
            if not more or not more[0]:
                break
            parts.extend(more)
            got += sum(len(p) for p in more)
        return self._empty.join(parts)

    # -- writing and moving ----------------------------------------------------------------
    def _write(self, data: Any) -> int:
        if self._lines:
            self._step_back()
        if not self._confirmed or len(data) >= WRITE_BUFFER:
            self._send_writes()
            self._write_now(data)
            self._confirmed = True
            return len(data)
        self._pending.append(data)
        self._pending_size += len(data)
        self._dirty()
        if self._pending_size >= WRITE_BUFFER:
            self._send_writes()
        return len(data)

    def seek(self, offset: int, whence: int = 0) -> int:
        """As the program's file seeks (relative seeks count what remote code has read)."""
        self._send_writes()
        if self._lines and whence == 1 and not isinstance(self._empty, str):
            offset -= self._unread()  # the client's file is past what was read ahead
            self._lines, self._offset, self._fetched = collections.deque(), 0, 0
        elif self._lines:
            self._step_back()
        position: int = self._ask("seek", offset, whence)
        return position

    def tell(self) -> int:
        """The program's file's position, less what remote code has not read of a read-ahead."""
        self._send_writes()
        if self._lines and isinstance(self._empty, str):
            return int(self._step_back())  # a text position is a cookie: no arithmetic
        return int(self._ask("tell")) - self._unread()

    def truncate(self, size: Optional[int] = None) -> int:
        """Truncates the program's file."""
        self._sync()
        result: int = self._ask("truncate", size)
        return result

    def flush(self) -> None:
        """Sends what was written, and flushes the program's file."""
        if not self._is_closed:
            self._sync()
            self._ask("flush")

    def close(self) -> None:
        """Closes this object, never the program's file (a local ``np.save(f)`` leaves ``f``
        open too); what was written is sent first."""
        if not self._is_closed:
            self._sync()
            self._is_closed = True

    @property
    def closed(self) -> bool:
        return self._is_closed

    def __getattr__(self, attribute: str) -> Any:
        # name and mode: the program's file's (a BytesIO has neither, here either).
        value = self.__dict__.get("_about", {}).get({"name": "n", "mode": "mode"}.get(attribute))
        if value is None:
            raise AttributeError(attribute)
        return value

    def readable(self) -> bool:
        return bool(self._about["r"])

    def writable(self) -> bool:
        return bool(self._about["w"])

    def seekable(self) -> bool:
        return bool(self._about["s"])

    def fileno(self) -> int:
        raise io.UnsupportedOperation("fileno: a file of the client program has no descriptor here")

    def __repr__(self) -> str:
        return f"<client file {self._about.get('n')!r}>"

    def __del__(self) -> None:
        # No I/O here (no call may be running): settle() has sent what there was to send.
        self._release(self._id)


def _ends_line(line: Any) -> bool:
    return bool(line) and line[-1:] in ("\n", "\r", b"\n")
