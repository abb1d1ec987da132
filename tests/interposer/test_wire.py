from __future__ import annotations

import array
import io
import json
import socket
import struct
import threading
import tracemalloc

import pytest

from radium_interposer import handshake, wire


def frames_over(chunks: list[bytes | memoryview]) -> io.BytesIO:
    return io.BytesIO(b"".join(bytes(c) for c in chunks))


def test_round_trip_with_out_of_band_buffers() -> None:
    big = bytearray(range(256)) * 4096
    chunks = wire.encode(
        wire.CALL, 7, {"fn": "numpy.linalg.inv", "shape": [32, 32]}, [big, b"", b"xyz"]
    )
    assert chunks[1].obj is big  # the buffer is sent as is, not copied into the message
    frame = wire.read(frames_over(chunks).readinto)
    assert frame is not None
    assert (frame.type, frame.call_id, frame.meta) == (
        wire.CALL,
        7,
        {"fn": "numpy.linalg.inv", "shape": [32, 32]},
    )
    assert [bytes(b) for b in frame.buffers] == [bytes(big), b"", b"xyz"]


def test_clean_eof_and_truncation() -> None:
    assert wire.read(io.BytesIO(b"").readinto) is None
    whole = b"".join(bytes(c) for c in wire.encode(wire.RESULT, 1, {"ok": True}, [b"abcdef"]))
    for cut in (3, wire.HEADER.size, len(whole) - 1):
        with pytest.raises(wire.ProtocolError, match="closed"):
            wire.read(io.BytesIO(whole[:cut]).readinto)


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (struct.pack("<4sBBHQIHH", b"HTTP", 3, 0, 0, 0, 0, 0, 0), "not a Radium data-plane frame"),
        (struct.pack("<4sBBHQIHH", b"RDM1", 99, 0, 0, 0, 0, 0, 0), "unknown frame type"),
        (struct.pack("<4sBBHQIHH", b"RDM1", 3, 1, 0, 0, 0, 0, 0), "reserved header bits"),
        (struct.pack("<4sBBHQIHH", b"RDM1", 3, 0, 0, 0, 1 << 31, 0, 0), "metadata of"),
        (struct.pack("<4sBBHQIHH", b"RDM1", 3, 0, 0, 0, 2, 65535, 0), "buffers exceed the limit"),
        (
            struct.pack("<4sBBHQIHH", b"RDM1", 3, 0, 0, 0, 2, 1, 0) + struct.pack("<Q", 1 << 40),
            "exceed the limits",
        ),
    ],
)
def test_limits_are_checked_before_allocating(header: bytes, message: str) -> None:
    tracemalloc.start()
    try:
        with pytest.raises(wire.ProtocolError, match=message):
            wire.read(io.BytesIO(header + b"{}").readinto)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20  # a declared terabyte allocated nothing


def test_send_survives_partial_writes() -> None:
    left, right = socket.socketpair()
    payload = bytes(range(256)) * 40_000  # larger than the socket buffer: sendmsg returns short
    received: list[wire.Frame | None] = []
    reader = threading.Thread(target=lambda: received.append(wire.read(right.recv_into)))
    reader.start()
    wire.send(left, wire.RESULT, 3, {"n": 1}, [payload, payload[:10]])
    reader.join(timeout=30)
    left.close()
    right.close()
    frame = received[0]
    assert (
        frame is not None
        and bytes(frame.buffers[0]) == payload
        and bytes(frame.buffers[1]) == payload[:10]
    )


class Trickle:
    """A socket whose sendmsg takes at most ``most`` bytes (and at most IOV_MAX pieces)."""

    def __init__(self, most: int) -> None:
        self.most, self.got = most, bytearray()

    def sendmsg(self, pieces: list[object]) -> int:
        assert len(pieces) <= wire.IOV_MAX
        data = b"".join(bytes(memoryview(p).cast("B")) for p in pieces)  # type: ignore[arg-type]
        self.got += data[: self.most]
        return min(self.most, len(data))


@pytest.mark.parametrize("most", [1, 7, 12, 1 << 30])  # 12: len(), not bytes, of `few`
def test_every_byte_goes_once_in_order_whatever_sendmsg_takes(most: int) -> None:
    floats = memoryview(array.array("d", [1.5, -2.0, 3.25]))  # len 3, 24 bytes
    few = [b"head", bytearray(b"ba"), floats, b"end"]
    for chunks in (few, [*few, *([b"xy"] * (wire.IOV_MAX + 5))]):
        sock = Trickle(most)
        wire.send_chunks(sock, chunks)  # type: ignore[arg-type]
        assert bytes(sock.got) == b"".join(bytes(memoryview(c).cast("B")) for c in chunks)


def run_handshake(
    client_credential: str, known: dict[str, str], lease: str = "l-abc"
) -> tuple[object, object]:
    a, b = socket.socketpair()
    outcome: dict[str, object] = {}

    def serve() -> None:
        try:
            outcome["server"] = handshake.server(b, known.get)
        except wire.ProtocolError as exc:
            outcome["server"] = exc

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        client_result: object = handshake.client(a, lease, client_credential)
    except wire.ProtocolError as exc:
        client_result = exc
    thread.join(timeout=10)
    a.close()
    b.close()
    return client_result, outcome["server"]


def test_handshake_proves_the_credential_without_sending_it() -> None:
    v = wire.VERSION
    assert run_handshake("s3cret", {"l-abc": "s3cret"}) == (v, ("l-abc", v))


@pytest.mark.parametrize(
    ("credential", "known"), [("wrong", {"l-abc": "s3cret"}), ("s3cret", {"l-other": "s3cret"})]
)
def test_handshake_refuses_wrong_or_foreign_credentials(
    credential: str, known: dict[str, str]
) -> None:
    client_result, server_result = run_handshake(credential, known)
    assert isinstance(client_result, handshake.AuthenticationError)
    assert isinstance(server_result, handshake.AuthenticationError)


def test_deeply_nested_metadata_is_a_protocol_error_not_a_crash() -> None:
    nested = b"[" * 3000 + b"]" * 3000
    head = wire.HEADER.pack(wire.MAGIC, wire.HELLO, 0, 0, 0, len(nested), 0, 0)
    with pytest.raises(wire.ProtocolError, match="not JSON"):
        wire.read(io.BytesIO(head + nested).readinto)


@pytest.mark.parametrize(
    "meta",
    [
        {},
        {"v": 1, "out": "π ≈ 3.14\n", "w": [{"m": "x", "l": 3}]},
        {"f": [1.5, float("inf"), -float("inf"), 1e300, -0.0], "n": None, "b": True},
        {"big": 1 << 80, "nested": {"a": [[], {}, ["\x00\udcff"]]}},
    ],
)
def test_metadata_is_the_json_it_always_was(meta: dict[str, object]) -> None:
    # The one-shot encoder made once (wire._json_encode) writes what json.dumps writes.
    assert wire._json_encode(meta) == json.dumps(meta, separators=(",", ":"))
    with pytest.raises(TypeError):
        wire._json_encode({"x": object()})
