"""The link between the pool and its lease-socket front (docs/lease-front.md): the messages,
what both ends read them with, and the outbox that sends a turn's messages in one write."""

from __future__ import annotations

import asyncio
import struct
from typing import Callable, Iterator, NamedTuple

from radium.errors import LeaseWireError
from radium.leaseclient import wire

__all__ = [
    "CALL",
    "CLOSE",
    "FROM_FRONT",
    "FROM_POOL",
    "GONE",
    "HELLO",
    "MESSAGE_LIMIT",
    "READY",
    "REFUSE",
    "SEND",
    "UNSENT",
    "WELCOME",
    "LinkEnd",
    "Message",
    "Outbox",
    "hello",
    "message",
    "messages",
    "parse_hello",
]

# Front -> pool.
READY = 1
HELLO = 2
CALL = 3
GONE = 4
UNSENT = 5
# Pool -> front.
WELCOME = 16
REFUSE = 17
SEND = 18
CLOSE = 19
FROM_FRONT = frozenset({READY, HELLO, CALL, GONE, UNSENT})
FROM_POOL = frozenset({WELCOME, REFUSE, SEND, CLOSE})
#: Longest message: far above any batch of replies, to catch a link that is out of step.
MESSAGE_LIMIT = 64 << 20
_HEADER = struct.Struct(">IBI")  # the length of what follows it, the kind, the connection
_KIND_AND_CONNECTION = 5
_PEER = struct.Struct(">H")
_CERTIFICATE = struct.Struct(">I")


class Message(NamedTuple):
    """One message of the link: its kind, the client connection it concerns, its payload."""

    kind: int
    connection: int
    payload: bytes


def message(kind: int, connection: int, payload: bytes = b"") -> bytes:
    """A message of the link, framed."""
    return _HEADER.pack(_KIND_AND_CONNECTION + len(payload), kind, connection) + payload


def messages(buffer: bytearray, kinds: frozenset[int]) -> Iterator[Message]:
    """The whole messages at the start of ``buffer``, each removed as it is taken; one of a
    kind not in ``kinds``, or over the limit, is a :class:`LeaseWireError` (a broken link)."""
    start = 0
    try:
        while len(buffer) - start >= _HEADER.size:
            length, kind, connection = _HEADER.unpack_from(buffer, start)
            if kind not in kinds or not _KIND_AND_CONNECTION <= length <= MESSAGE_LIMIT:
                raise LeaseWireError(f"the lease front's link is broken (kind {kind}, {length} B)")
            end = start + 4 + length
            if len(buffer) < end:
                break
            payload = bytes(buffer[start + _HEADER.size : end])
            start = end
            yield Message(kind, connection, payload)
    finally:
        del buffer[:start]


def hello(peer: str, certificate: bytes, body: bytes) -> bytes:
    """A ``HELLO``'s payload."""
    name = peer.encode()[:0xFFFF]
    return _PEER.pack(len(name)) + name + _CERTIFICATE.pack(len(certificate)) + certificate + body


def parse_hello(payload: bytes) -> tuple[str, bytes, bytes]:
    """(the peer, its certificate, the hello frame's body) of a ``HELLO``'s payload."""
    try:
        (size,) = _PEER.unpack_from(payload)
        peer_end = _PEER.size + size
        (length,) = _CERTIFICATE.unpack_from(payload, peer_end)
    except struct.error as exc:
        raise LeaseWireError("the lease front's link is broken (a short HELLO)") from exc
    start = peer_end + _CERTIFICATE.size
    if start + length > len(payload):
        raise LeaseWireError("the lease front's link is broken (a short HELLO)")
    peer = payload[_PEER.size : peer_end].decode(errors="replace")
    return peer, payload[start : start + length], payload[start + length :]


class Outbox:
    """Gathers the messages of a turn and writes them in one call: at :meth:`flush`, or at the
    start of the loop's next turn if nobody flushes first."""

    def __init__(self, write: Callable[[bytes], None]) -> None:
        self._write = write
        self._parts: list[bytes] = []
        self._due = False

    def put(self, kind: int, connection: int, payload: bytes = b"") -> None:
        self._parts.append(message(kind, connection, payload))
        if not self._due:
            self._due = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        self._due = False
        if self._parts:
            parts, self._parts = self._parts, []
            self._write(b"".join(parts))


class LinkEnd(wire.Receiver):
    """Either end of the link: what it receives, and an :class:`Outbox` that writes to it
    while it is open."""

    def __init__(self) -> None:
        super().__init__()
        self.transport: asyncio.Transport | None = None
        self.outbox = Outbox(self._write)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def _write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)
