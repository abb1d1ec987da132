"""Fuzzing the frame parser and the handshake (hypothesis; about 100,000 inputs in all)."""

from __future__ import annotations

import contextlib
import io
import os
import socket
import threading

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from radium_interposer import handshake, wire


def fuzz(examples: int) -> settings:
    return settings(
        max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None
    )


LIMITS = wire.Limits(max_meta=4096, max_buffers=8, max_buffer=1 << 16, max_total=1 << 18)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)
frames = st.tuples(
    st.sampled_from(sorted(wire.TYPES)),
    st.integers(0, 2**64 - 1),
    st.dictionaries(st.text(max_size=10), json_values, max_size=5),
    st.lists(st.binary(max_size=512), max_size=4),
)


def parse_all(data: bytes) -> list[wire.Frame]:
    """Parse a byte stream to its end; only ProtocolError may escape."""
    stream, out = io.BytesIO(data), []
    while True:
        frame = wire.read(stream.readinto, LIMITS)
        if frame is None:
            return out
        out.append(frame)


@fuzz(40_000)
@given(st.binary(max_size=256))
def test_random_bytes_never_crash_the_parser(data: bytes) -> None:
    with contextlib.suppress(wire.ProtocolError):
        parse_all(wire.MAGIC + data if data[:1] == b"\x00" else data)


@fuzz(10_000)
@given(frames)
def test_round_trip(frame: tuple[int, int, dict[str, object], list[bytes]]) -> None:
    type_, call_id, meta, buffers = frame
    (parsed,) = parse_all(b"".join(bytes(c) for c in wire.encode(type_, call_id, meta, buffers)))
    assert (parsed.type, parsed.call_id, parsed.meta) == (type_, call_id, meta)
    assert [bytes(b) for b in parsed.buffers] == buffers


@fuzz(40_000)
@given(
    frames,
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=6),
    st.integers(0, 10_000),
)
def test_mutated_frames_parse_or_fail_cleanly(
    frame: tuple[int, int, dict[str, object], list[bytes]], flips: list[tuple[int, int]], cut: int
) -> None:
    data = bytearray(b"".join(bytes(c) for c in wire.encode(*frame)))
    for position, value in flips:
        data[position % len(data)] = value
    with contextlib.suppress(wire.ProtocolError):
        parse_all(bytes(data[: max(1, cut % (len(data) + 1))]))


@fuzz(10_000)
@given(st.lists(frames | st.binary(max_size=64), max_size=3))
def test_handshake_server_never_accepts_garbage(messages: list[object]) -> None:
    a, b = socket.socketpair()
    a.settimeout(5)
    b.settimeout(5)
    result: dict[str, object] = {}

    def serve() -> None:
        try:
            result["server"] = handshake.server(b, {"l-abc": os.urandom(8).hex()}.get)
        except (wire.ProtocolError, OSError) as exc:
            result["server"] = exc
        finally:
            b.close()

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        for message in messages:
            if isinstance(message, bytes):
                a.sendall(message)
            else:
                wire.send(a, *message)  # type: ignore[misc]
        a.shutdown(socket.SHUT_WR)
    except OSError:
        pass  # the server already hung up on us
    thread.join(timeout=10)
    a.close()
    assert not thread.is_alive()
    assert isinstance(result["server"], (wire.ProtocolError, OSError))
