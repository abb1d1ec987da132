"""A worker's control socket: how its acceptor talks to it (docs/data-plane.md, "Workers").

A unix stream socket carrying tagged messages; the kernel may glue several into one read (a
descriptor comes with the read that holds its ``c``), so the reader parses a buffer:

- ``r``: worker to acceptor, once: the worker is up.
- ``c`` with one descriptor (``SCM_RIGHTS``): an authenticated client connection to serve.
- ``n``, a 4-byte big-endian length, that many bytes of UTF-8: the lease is preempted; the text
  says for whom and until when. Each client connection's next call raises ``LeasePreempted``.

Anything else is a protocol error: the worker logs it and drops the buffer.
"""

from __future__ import annotations

import logging
import os
import socket
import struct
from typing import Callable

from radium_interposer import wire

log = logging.getLogger("radium.worker")
READY, CONNECTION, NOTICE = b"r", b"c", b"n"
_LENGTH = struct.Struct(">I")
#: A notice is a line of text; anything longer is a broken acceptor, not a message.
MAX_NOTICE = 64 << 10


def notice(text: str) -> bytes:
    """The ``n`` message for ``text``."""
    payload = text.encode("utf-8")[:MAX_NOTICE]
    return NOTICE + _LENGTH.pack(len(payload)) + payload


def serve(
    control: socket.socket,
    on_connection: Callable[[int], None],
    on_notice: Callable[[str], None],
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
        fd = _parse(buffer, fd, on_connection, on_notice)
        if fd is not None:  # a descriptor with no ``c`` to go with it
            os.close(fd)


def _parse(
    buffer: bytearray,
    fd: int | None,
    on_connection: Callable[[int], None],
    on_notice: Callable[[str], None],
) -> int | None:
    """Act on every whole message at the start of ``buffer`` and remove it; the descriptor
    if no message took it. A partial notice stays in the buffer for the next read."""
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
        else:
            log.warning("control socket: unknown message %r; dropped", tag)
            buffer.clear()
    return fd
