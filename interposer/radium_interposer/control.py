"""A worker's control socket: how its acceptor talks to it (docs/data-plane.md, "Workers").

A unix stream socket carrying tagged messages; the kernel may glue several into one read (a
descriptor comes with the read that holds its ``c``), so the reader parses a buffer:

- ``r``: worker to acceptor, once: the worker is up.
- ``c`` with one descriptor (``SCM_RIGHTS``): an authenticated client connection to serve.
- ``n``, a 4-byte big-endian length, that many bytes of UTF-8: the lease is preempted; the text
  says for whom and until when. Each client connection's next call raises ``LeasePreempted``.
- ``q``: acceptor to worker: send your counters; the worker answers ``s``, a 4-byte big-endian
  length and a JSON object of its data-plane counters.

Anything else is a protocol error: the worker logs it and drops the buffer. The acceptor's
side reads the answers with :class:`CountersReader`, which trusts nothing in them: the worker
runs the tenant's code.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import socket
import struct
from typing import Callable, Dict, Optional, Union

from radium_interposer import wire

__all__ = [
    "COUNTER_NAMES",
    "MAX_COUNTERS",
    "MAX_NOTICE",
    "MAX_UNREAD",
    "Counters",
    "CountersReader",
    "checked_counters",
    "counters_message",
    "notice",
    "serve",
]

log = logging.getLogger("radium.worker")
READY, CONNECTION, NOTICE, QUERY, COUNTERS = b"r", b"c", b"n", b"q", b"s"
_LENGTH = struct.Struct(">I")
#: A notice is a line of text; anything longer is a broken acceptor, not a message.
MAX_NOTICE = 64 << 10
#: The counters a worker reports, and the most bytes their JSON may take.
COUNTER_NAMES = ("calls", "bytes_in", "bytes_out", "busy_seconds", "errors")
MAX_COUNTERS = 4 << 10
#: Unread bytes from a worker past which they are dropped (it talks without being asked).
MAX_UNREAD = 64 << 10
Counters = Dict[str, Union[int, float]]


def notice(text: str) -> bytes:
    """The ``n`` message for ``text``."""
    payload = text.encode("utf-8")[:MAX_NOTICE]
    return NOTICE + _LENGTH.pack(len(payload)) + payload


def counters_message(counters: Counters) -> bytes:
    """The ``s`` message for ``counters``."""
    payload = json.dumps({k: counters.get(k, 0) for k in COUNTER_NAMES}).encode()
    return COUNTERS + _LENGTH.pack(len(payload)) + payload


def serve(
    control: socket.socket,
    on_connection: Callable[[int], None],
    on_notice: Callable[[str], None],
    counters: Callable[[], Counters] = dict,
) -> None:
    """Act on the acceptor's messages until it closes the socket (or goes away)."""
    buffer = bytearray()
    while True:
        try:
            data, fd = wire.recv_fd(control)
        except OSError:  # the acceptor went away: as good as closing the socket
            return
        if not data:
            if fd is not None:
                os.close(fd)
            return
        buffer += data
        fd, queried = _parse(buffer, fd, on_connection, on_notice)
        if queried:  # several queries in one read are answered once
            try:
                control.sendall(counters_message(counters()))
            except OSError:
                return
        if fd is not None:  # a descriptor with no ``c`` to go with it
            os.close(fd)


def _parse(
    buffer: bytearray,
    fd: int | None,
    on_connection: Callable[[int], None],
    on_notice: Callable[[str], None],
) -> tuple[int | None, bool]:
    """Act on every whole message at the start of ``buffer`` and remove it; the descriptor
    if no message took it, and whether counters were asked for. A partial notice stays in the
    buffer for the next read."""
    queried = False
    while buffer:
        tag = bytes(buffer[:1])
        if tag == CONNECTION:
            del buffer[:1]
            if fd is not None:
                on_connection(fd)
                fd = None
        elif tag == NOTICE:
            if len(buffer) < 1 + _LENGTH.size:
                break
            (size,) = _LENGTH.unpack_from(buffer, 1)
            if size > MAX_NOTICE:
                log.warning("control socket: a notice of %d bytes; dropped", size)
                buffer.clear()
                break
            end = 1 + _LENGTH.size + size
            if len(buffer) < end:
                break
            on_notice(bytes(buffer[1 + _LENGTH.size : end]).decode("utf-8", "replace"))
            del buffer[:end]
        elif tag == QUERY:
            del buffer[:1]
            queried = True
        else:
            log.warning("control socket: unknown message %r; dropped", tag)
            buffer.clear()
    return fd, queried


class CountersReader:
    """The acceptor's side of ``q``/``s``: the latest counters a worker answered, read without
    waiting. Whatever the worker sends is checked; garbage is dropped and logged once."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.latest: Optional[Counters] = None

    def ask(self, control: socket.socket) -> None:
        # Gone, or a full buffer because it does not read: no answer then.
        with contextlib.suppress(OSError):
            control.send(QUERY, socket.MSG_DONTWAIT)

    def poll(self, control: socket.socket) -> Optional[Counters]:
        """The latest counters answered so far, and ask for the next (a heartbeat late)."""
        latest = self.read(control)
        self.ask(control)
        return latest

    def read(self, control: socket.socket) -> Optional[Counters]:
        """Drain what the worker sent since the last read; the latest valid counters."""
        while True:
            try:
                data = control.recv(MAX_UNREAD, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                return self.latest
            if not data:
                break
            self.buffer += data
            if len(self.buffer) > MAX_UNREAD:
                log.warning("control socket: a worker sent %d bytes unasked; dropped", len(data))
                self.buffer.clear()
        self._parse()
        return self.latest

    def _parse(self) -> None:
        buffer = self.buffer
        while buffer:
            if buffer[:1] != COUNTERS:
                log.warning(
                    "control socket: unexpected %r from a worker; dropped", bytes(buffer[:1])
                )
                buffer.clear()
                return
            if len(buffer) < 1 + _LENGTH.size:
                return
            (size,) = _LENGTH.unpack_from(buffer, 1)
            end = 1 + _LENGTH.size + size
            if size > MAX_COUNTERS:
                log.warning("control socket: counters of %d bytes from a worker; dropped", size)
                buffer.clear()
                return
            if len(buffer) < end:
                return
            counters = checked_counters(bytes(buffer[1 + _LENGTH.size : end]))
            del buffer[:end]
            if counters is None:
                log.warning("control socket: malformed counters from a worker; dropped")
            else:
                self.latest = counters


def checked_counters(payload: bytes) -> Optional[Counters]:
    """The counters in ``payload``, or None unless it is a JSON object of exactly the known
    names with finite, non-negative numbers below 2**63 (integers where counts are)."""
    try:
        value = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(value, dict) or set(value) != set(COUNTER_NAMES):
        return None
    for name, number in value.items():
        if isinstance(number, bool) or not isinstance(number, (int, float)):
            return None
        if name != "busy_seconds" and not isinstance(number, int):
            return None
        if not (math.isfinite(number) and 0 <= number < 2**63):
            return None
    return value
