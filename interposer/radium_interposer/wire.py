"""The data-plane wire format: framed binary messages with out-of-band buffers.

Spec: docs/data-plane.md. Stdlib only, Python 3.8+: this module runs inside containers (the
interposer) and in acceptor workers alike. Every declared size is checked against limits
*before* anything is allocated, and nothing here deserialises objects: metadata is JSON.
"""

import json
import socket
import struct
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from radium_interposer.unix_fds import recv_fd, send_fd, send_within

__all__ = [
    "BINARY",
    "BUFLEN",
    "HANDSHAKE_LIMITS",
    "HEADER",
    "IOV_MAX",
    "MAGIC",
    "TYPES",
    "VERSION",
    "Buffer",
    "Frame",
    "Limits",
    "ProtocolError",
    "ReadInto",
    "encode",
    "encode_batch",
    "read",
    "recv_fd",
    "send",
    "send_chunks",
    "send_fd",
    "send_within",
]

Buffer = Union[bytes, bytearray, memoryview]
ReadInto = Callable[[memoryview], int]

MAGIC = b"RDM1"
VERSION = 4
HEADER = struct.Struct(
    "<4sBBHQIHH"
)  # magic, type, flags, reserved, call id, meta len, nbuf, reserved
BUFLEN = struct.Struct("<Q")

HELLO, CHALLENGE, PROOF, WELCOME, CALL, RESULT, ERROR, RELEASE, BYE = range(1, 10)
TYPES = frozenset(range(1, 10))
#: Header flag: the metadata section is a binary batch body (records), not JSON. Only a CALL
#: from client to worker may carry it (data-plane version 2; docs/data-plane.md, "Batches").
BINARY = 1


class ProtocolError(ValueError):
    """The peer sent something this protocol does not allow; the connection must be closed."""


class Limits:
    """Largest sizes a reader accepts (defaults suit the interposer; workers may raise them)."""

    __slots__ = ("max_buffer", "max_buffers", "max_meta", "max_total")

    def __init__(
        self,
        max_meta: int = 1 << 20,
        max_buffers: int = 64,
        max_buffer: int = 1 << 30,
        max_total: int = 2 << 30,
    ) -> None:
        self.max_meta = max_meta
        self.max_buffers = max_buffers
        self.max_buffer = max_buffer
        self.max_total = max_total


HANDSHAKE_LIMITS = Limits(max_meta=4096, max_buffers=0, max_buffer=0, max_total=0)


class Frame:
    """One frame; a binary batch has its records in ``body`` and an empty ``meta``."""

    __slots__ = ("body", "buffers", "call_id", "meta", "type")

    def __init__(
        self,
        type_: int,
        call_id: int,
        meta: Dict[str, Any],
        buffers: Sequence[bytearray] = (),
        body: Optional[bytes] = None,
    ) -> None:
        self.type = type_
        self.call_id = call_id
        self.meta = meta
        self.buffers = list(buffers)
        self.body = body

    def __repr__(self) -> str:
        sizes = [len(b) for b in self.buffers]
        return (
            f"Frame(type={self.type}, call_id={self.call_id}, meta={self.meta!r}, buffers={sizes})"
        )


def _json_encoder() -> Callable[[Any], str]:
    """``json.dumps(obj, separators=(",", ":"), check_circular=False)``. With json's C
    accelerator, its one-shot encoder is made once here, not at every frame as
    ``JSONEncoder.encode`` makes it (the same object, with the same arguments)."""
    encoder = json.JSONEncoder(separators=(",", ":"), check_circular=False)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return encoder.encode
    one_shot = make(
        None,  # no markers: check_circular=False
        encoder.default,
        json.encoder.encode_basestring_ascii,  # ensure_ascii
        None,  # indent
        encoder.key_separator,
        encoder.item_separator,
        encoder.sort_keys,
        encoder.skipkeys,
        encoder.allow_nan,
    )

    def encode(obj: Any) -> str:
        return "".join(one_shot(obj, 0))

    return encode


_json_encode = _json_encoder()


def encode(
    type_: int, call_id: int, meta: Dict[str, Any], buffers: Sequence[Buffer] = ()
) -> List[Union[bytes, memoryview]]:
    """The frame as a list of byte chunks for ``socket.sendmsg``: buffers are not copied."""
    if type_ not in TYPES:
        raise ValueError(f"unknown frame type {type_!r}")
    if not isinstance(meta, dict):
        raise ValueError("frame metadata must be a dict")
    meta_bytes = _json_encode(meta).encode("utf-8")
    if not buffers:  # most frames: a small call or answer
        return [HEADER.pack(MAGIC, type_, 0, 0, call_id, len(meta_bytes), 0, 0) + meta_bytes]
    views = [memoryview(b).cast("B") for b in buffers]
    head = HEADER.pack(MAGIC, type_, 0, 0, call_id, len(meta_bytes), len(views), 0)
    sizes = b"".join(BUFLEN.pack(v.nbytes) for v in views)
    return [head + sizes + meta_bytes, *views]


def encode_batch(call_id: int, body: Buffer) -> List[Union[bytes, memoryview]]:
    """A CALL frame whose metadata section is a binary batch ``body`` (records, no buffers)."""
    view = memoryview(body)
    return [HEADER.pack(MAGIC, CALL, BINARY, 0, call_id, view.nbytes, 0, 0), view]


_LIMITS = Limits()
#: json.loads without its keyword checks (the same decoder it uses).
_json = json.JSONDecoder().decode


def _read_exact(readinto: ReadInto, size: int) -> bytearray:
    buf = bytearray(size)
    view = memoryview(buf)
    got = readinto(view)  # most often all of it (a buffered reader holds the frame)
    if got == size:
        return buf
    if not got:
        raise ProtocolError("connection closed in the middle of a frame")
    while got < size:
        n = readinto(view[got:])
        if not n:
            raise ProtocolError("connection closed in the middle of a frame")
        got += n
    return buf


def read(
    readinto: ReadInto, limits: Optional[Limits] = None, batches: bool = False
) -> Optional[Frame]:
    """Read one frame; ``readinto(memoryview) -> int`` is e.g. ``sock.recv_into`` (0 = EOF).
    ``batches``: binary batch CALLs are allowed (the worker's side); their body is not parsed
    here.

    Returns None on a clean end of stream before a frame starts.
    """
    limits = limits or _LIMITS
    head = bytearray(HEADER.size)
    view = memoryview(head)
    got = readinto(view)
    if got != HEADER.size:
        if not got:
            return None
        while got < HEADER.size:
            n = readinto(view[got:])
            if not n:
                raise ProtocolError("connection closed in a frame header")
            got += n
    magic, type_, flags, reserved, call_id, meta_len, nbuf, reserved2 = HEADER.unpack(head)
    plain = magic == MAGIC and type_ in TYPES and not (flags or reserved or reserved2 or nbuf)
    if not plain or meta_len > limits.max_meta:  # every small call and answer is plain
        _check(magic, type_, flags, reserved or reserved2, meta_len, nbuf, limits, batches)
    sizes: List[int] = []
    if nbuf:
        sizes = [BUFLEN.unpack_from(_read_exact(readinto, BUFLEN.size))[0] for _ in range(nbuf)]
        if max(sizes) > limits.max_buffer or sum(sizes) > limits.max_total:
            raise ProtocolError(f"buffers of {sum(sizes)} bytes exceed the limits")
    elif flags:  # a binary batch (_check allowed it)
        body = bytes(_read_exact(readinto, meta_len)) if meta_len else b""
        return Frame(type_, call_id, {}, (), body)
    try:
        meta = _json(_read_exact(readinto, meta_len).decode("utf-8")) if meta_len else None
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ProtocolError(f"frame metadata is not JSON: {exc}") from None
    if type(meta) is not dict:
        raise ProtocolError("frame metadata is not a JSON object")
    return Frame(
        type_, call_id, meta, [_read_exact(readinto, size) for size in sizes] if nbuf else []
    )


def _check(
    magic: bytes,
    type_: int,
    flags: int,
    reserved: int,
    meta_len: int,
    nbuf: int,
    limits: Limits,
    batches: bool,
) -> None:
    """A header that is not a plain frame's: refused, unless it is a frame with buffers or (with
    ``batches``) a binary batch, within the limits."""
    if magic != MAGIC:
        raise ProtocolError("not a Radium data-plane frame")
    if type_ not in TYPES:
        raise ProtocolError(f"unknown frame type {type_}")
    binary = flags == BINARY and batches and type_ == CALL
    if (flags and not binary) or reserved:
        raise ProtocolError("reserved header bits are set")
    if binary and nbuf:
        raise ProtocolError("a binary batch has buffers")
    if meta_len > limits.max_meta:
        raise ProtocolError(f"metadata of {meta_len} bytes exceeds the limit of {limits.max_meta}")
    if nbuf > limits.max_buffers:
        raise ProtocolError(f"{nbuf} buffers exceed the limit of {limits.max_buffers}")


#: sendmsg takes at most this many pieces (Linux IOV_MAX).
IOV_MAX = 1024


def send_chunks(sock: socket.socket, chunks: Sequence[Buffer]) -> None:
    """Send encoded frames (what :func:`encode` and :func:`encode_batch` make) with
    scatter/gather I/O: big buffers reach the kernel uncopied."""
    sent = 0
    if len(chunks) <= IOV_MAX:  # the common case: one sendmsg takes everything
        sent = sock.sendmsg(chunks)
        total = 0
        for chunk in chunks:
            total += chunk.nbytes if type(chunk) is memoryview else len(chunk)
        if sent == total:
            return
    views = [memoryview(c).cast("B") for c in chunks]
    first = 0
    while True:
        while first < len(views) and sent >= views[first].nbytes:
            sent -= views[first].nbytes
            first += 1
        if first == len(views):
            return
        if sent:
            views[first] = views[first][sent:]
        sent = sock.sendmsg(views[first : first + IOV_MAX])


def send(
    sock: socket.socket,
    type_: int,
    call_id: int,
    meta: Dict[str, Any],
    buffers: Sequence[Buffer] = (),
) -> None:
    """Send one frame now."""
    send_chunks(sock, encode(type_, call_id, meta, buffers))
