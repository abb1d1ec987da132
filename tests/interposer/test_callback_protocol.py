"""The callback protocol at frame level (docs/data-plane.md, "Callbacks"): the worker's session
keeps a connection's calls in order while it waits for a callback, and neither side is broken
by what the other sends (hypothesis fuzzing, both directions)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from radium_interposer import callbacks, client, structs, tags, wire
from radium_interposer.session import CALLBACK_BIT, Session
from tests.interposer.test_wire_fuzz import frames, fuzz, json_values


@contextlib.contextmanager
def session_pair() -> Iterator[tuple[Session, socket.socket, list[wire.Frame]]]:
    """A worker session on one end of a socketpair (its handler records the calls it runs), the
    client's end, and the recorded calls."""
    ours, theirs = socket.socketpair()
    ran: list[wire.Frame] = []

    def handle(session: Session, frame: wire.Frame) -> None:
        ran.append(frame)
        if not frame.meta.get("nr"):
            session.answer(wire.RESULT, frame.call_id, {"v": frame.meta.get("op")}, [])

    session = Session(ours, handle, lambda ids: None)
    try:
        yield session, theirs, ran
    finally:
        ours.close()
        theirs.close()


def test_calls_made_by_the_callback_run_at_once_and_earlier_pipelined_ones_after() -> None:
    with session_pair() as (session, peer, ran):
        session.running = 1  # the call that makes the callback
        answer: list[wire.Frame] = []
        waiting = threading.Thread(
            target=lambda: answer.append(session.call_client({"op": "callback", "cb": 1}, []))
        )
        waiting.start()
        reader = peer.makefile("rb")
        callback = wire.read(reader.readinto)
        assert callback is not None and callback.call_id & CALLBACK_BIT
        # A pipelined call sent before this side saw the callback, then one the callback made.
        wire.send(peer, wire.CALL, 7, {"op": "later", "nr": 1})
        wire.send(peer, wire.CALL, 8, {"op": "inside", "in": callback.call_id})
        inside = wire.read(reader.readinto)
        assert inside is not None and (inside.call_id, inside.meta["v"]) == (8, "inside")
        wire.send(peer, wire.RESULT, callback.call_id, {"v": 42})
        waiting.join(10)
        assert answer[0].meta["v"] == 42
        assert [f.meta["op"] for f in ran] == ["inside"]
        assert [f.meta["op"] for f in session.deferred] == ["later"]
        session.running = 0
        peer.shutdown(socket.SHUT_WR)
        session.serve()  # the deferred call runs first, in order
        assert [f.meta["op"] for f in ran] == ["inside", "later"]


def test_a_callback_needs_a_running_call_of_its_connection() -> None:
    with (
        session_pair() as (session, _peer, _ran),
        pytest.raises(RuntimeError, match="when no call of its connection runs"),
    ):
        session.call_client({"op": "callback", "cb": 1}, [])


def test_an_answer_to_another_callback_breaks_the_connection_cleanly() -> None:
    with session_pair() as (session, peer, _ran):
        session.running = 1
        wire.send(peer, wire.RESULT, CALLBACK_BIT | 99, {"v": 1})
        with pytest.raises(wire.ProtocolError, match="not awaited"):
            session.call_client({"op": "callback", "cb": 1}, [])
        assert session.closed


@fuzz(800)
@given(st.lists(frames, max_size=4), st.booleans())
def test_whatever_the_client_sends_a_waiting_callback_ends_cleanly(
    sent: list[tuple[int, int, dict[str, Any], list[bytes]]], answer: bool
) -> None:
    with session_pair() as (session, peer, _ran):
        session.running = 1
        for frame in sent:
            wire.send(peer, *frame)
        if answer:
            wire.send(peer, wire.RESULT, CALLBACK_BIT | 1, {"v": 1})
        peer.shutdown(socket.SHUT_WR)
        try:
            frame = session.call_client({"op": "callback", "cb": 1}, [])
        except (wire.ProtocolError, ConnectionError, OSError):
            assert session.closed
        else:
            assert frame.call_id == CALLBACK_BIT | 1 and frame.type in (wire.RESULT, wire.ERROR)


#: Value trees with every tag the codec knows, in arguments a callback request carries.
TAGS = sorted({*tags.REFERENCES, *structs.TAGS, "t", "d", "b", "ba", "set", "c", "sl", "nd"})
tagged = st.recursive(
    json_values,
    lambda inner: st.fixed_dictionaries(
        {"$": st.sampled_from(TAGS)},
        optional={
            "v": st.lists(inner, max_size=3),
            "k": st.lists(inner, max_size=3),
            "i": st.integers(-1, 3),
            "id": st.integers(),
            "n": st.text(max_size=4),
            "p": st.text(max_size=8),
            "t": st.text(max_size=8),
            "sh": st.lists(st.integers(-1, 3), max_size=2),
            "dt": st.sampled_from(["<f8", "|b1", "zz"]),
        },
    ),
    max_leaves=8,
)
callback_meta = st.fixed_dictionaries(
    {"op": st.sampled_from(["callback", "open", "file", "fs", "call", "x"])},
    optional={
        "cb": st.integers() | json_values,
        "a": st.lists(tagged, max_size=3) | tagged,
        "k": tagged,
        "out": st.text(max_size=5),
        # Reading only: a fuzzed path must not create files here.
        "path": st.text(max_size=12) | json_values,
        "mode": st.sampled_from(["rb", "r", "wt", "rb+x"]) | json_values,
        "f": st.integers() | json_values,
        # No fs call that changes anything: a fuzzed path must not touch the machine.
        "m": st.sampled_from(
            ["read", "seek", "tell", "close", "write", "__class__", "fileno", "stat", "listdir"]
        ),
    },
)


@fuzz(800)
@given(st.lists(callback_meta | st.dictionaries(st.text(max_size=5), json_values), max_size=5))
def test_the_client_answers_every_callback_request_and_survives(
    requests: list[dict[str, Any]],
) -> None:
    ours, theirs = socket.socketpair()
    known = callbacks.reference(lambda *args, **kwargs: [len(args), sorted(kwargs)])
    assert known is not None
    conn = client.Connection(ours)
    answers: list[tuple[int, int]] = []
    failures: list[BaseException] = []

    def worker() -> None:
        try:
            reader = theirs.makefile("rb")
            call = wire.read(reader.readinto)
            assert call is not None
            for number, meta in enumerate(requests, 1):
                if meta.get("cb") == 0:
                    meta["cb"] = known["id"]
                wire.send(theirs, wire.CALL, CALLBACK_BIT | number, meta)
                reply = wire.read(reader.readinto)
                assert reply is not None, "the client did not answer"
                answers.append((reply.type, reply.call_id))
            wire.send(theirs, wire.RESULT, call.call_id, {"v": "done", "cbrel": [known["id"]]})
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        frame = conn.request({"op": "ping"})
    finally:
        thread.join(10)
        ours.close()
        theirs.close()
    assert not failures, failures
    assert frame is not None and frame.meta["v"] == "done"
    assert [call_id for _, call_id in answers] == [
        CALLBACK_BIT | n for n in range(1, len(requests) + 1)
    ]
    assert all(kind in (wire.RESULT, wire.ERROR) for kind, _ in answers)
    assert not callbacks.held()  # released by the answer's cbrel
