"""Binary batches (data-plane version 2): the client's templates and records, the worker's
reading and running of them, and what a malformed body does (docs/data-plane.md, "Batches")."""

from __future__ import annotations

import io
import json
import random
import struct
from typing import Any, Dict, List, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from radium_interposer import poison, records, templates, wire
from radium_interposer.handles import Failure, HandleTable
from radium_interposer.worker_batch import Batches


def handle(i: int) -> Dict[str, Any]:
    return {"$": "h", "id": i}


class Remote:
    """A stand-in for a proxy: what ``reference`` gives a tree for."""

    def __init__(self, tree: Dict[str, Any]) -> None:
        self.tree = tree


def reference(obj: Any) -> Optional[Dict[str, Any]]:
    return obj.tree if isinstance(obj, Remote) else None


def record(t: templates.Templates, f: Dict[str, Any], *args: Any, **kwargs: Any) -> Any:
    return t.record(f, args, kwargs, 7, "site", reference)


SUM = {"$": "a", "o": handle(5), "n": "sum"}
ADD = {"$": "p", "p": "operator.add"}


def test_a_shape_is_defined_once_then_each_call_is_its_slots() -> None:
    t = templates.Templates()
    first = record(t, SUM, 1, dtype=Remote({"$": "p", "p": "numpy.float32"}), keepdims=True)
    second = record(t, SUM, 2, dtype=Remote({"$": "p", "p": "numpy.float32"}), keepdims=True)
    assert first[0] == records.DEFINE and second[0] == records.CALL
    layout = records.call_struct("hi")
    assert len(second) == layout.size == 1 + 4 + 8 + 8 + 8  # kind, tid, r, handle, int
    parsed = records.Reader().parse(first + second)
    assert [r[0] for r in parsed] == ["D", "C", "C"]
    definition = parsed[0][2]
    assert definition == {
        "f": {"$": "a", "o": {"$": "_", "i": 0}, "n": "sum"},
        "a": [{"$": "_", "i": 1}, {"$": "p", "p": "numpy.float32"}, True],
        "k": ["dtype", "keepdims"],
        "s": "hi",
    }
    assert parsed[1][1:] == (1, 7, (5, 1)) and parsed[2][1:] == (1, 7, (5, 2))


def test_constants_and_slot_kinds_make_separate_templates() -> None:
    t = templates.Templates()
    shapes = [(1,), (1.5,), (None,), (True,), ("mean",), ("sum",), (Remote(handle(3)),)]
    kinds = [records.Reader().parse(record(t, ADD, *a))[0][2]["s"] for a in shapes]
    assert kinds == ["i", "f", "", "", "", "", "h"]
    assert len(t.by_key) == len(shapes)
    # True is not 1 and False is not 0: a constant bool never reuses an int's template.
    assert record(t, ADD, 1)[0] == records.CALL and record(t, ADD, True)[0] == records.CALL
    assert record(t, ADD, False)[0] == records.DEFINE


@pytest.mark.parametrize(
    "args",
    [
        ([1, 2],),
        (1 << 63,),
        ("x" * (templates.MAX_CONSTANT + 1),),
        (object(),),
        (b"bytes",),
        (Remote({"$": "sv", "dt": "<f8", "b": "AA=="}),),
        (slice(1, 2),),
    ],
)
def test_other_shapes_go_as_json(args: Any) -> None:
    assert record(templates.Templates(), ADD, *args) is None


def test_a_site_whose_constants_vary_stops_making_templates() -> None:
    t = templates.Templates()
    made = [record(t, ADD, f"s{i}") for i in range(templates.PER_SITE + 3)]
    assert all(m is not None for m in made[: templates.PER_SITE])
    assert made[templates.PER_SITE :] == [None] * 3


# -- a malformed body: refused whole, before anything runs -----------------------------------
def definition(tid: int, body: Dict[str, Any]) -> bytes:
    return records.define(tid, body)


GOOD = {"f": ADD, "a": [{"$": "_", "i": 0}, 1], "k": [], "s": "h"}


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"Z", "unknown record kind"),
        (records.call_struct("h").pack(records.CALL, 1, 7, 5), "never defined"),
        (definition(1, GOOD) + definition(1, GOOD), "defined twice"),
        (definition(1, GOOD)[:-1], "definition of"),
        (definition(1, GOOD) + records.call_struct("h").pack(records.CALL, 1, 7, 5)[:-1], "past"),
        (definition(1, {**GOOD, "s": "hh"}), "slots once"),
        (definition(1, {**GOOD, "s": "q"}), "slot kinds"),
        (definition(1, {**GOOD, "a": [{"$": "_", "i": 0}, {"$": "_", "i": 0}]}), "slots once"),
        (definition(1, {**GOOD, "k": ["a", "b", "c"]}), "keyword names"),
        (struct.pack("<BII", records.DEFINE, 1, 2) + b"{]", "not JSON"),
        (struct.pack("<BII", records.DEFINE, 1, 2) + b"[]", "not a JSON object"),
        (struct.pack("<BI", records.RELEASE, 1 << 30), "release of"),
    ],
)
def test_a_malformed_body_is_refused(body: bytes, says: str) -> None:
    with pytest.raises(records.RecordError, match=says):
        records.Reader().parse(body)


@settings(max_examples=3000, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(st.binary(max_size=200))
def test_random_bodies_only_ever_raise_record_error(data: bytes) -> None:
    try:
        parsed = records.Reader().parse(data)
    except records.RecordError:
        return
    assert all(r[0] in "DCL" for r in parsed)  # e.g. an empty release: a valid body


def test_mutated_valid_bodies_only_ever_raise_record_error() -> None:
    t = templates.Templates()
    body = b"".join(
        [
            record(t, SUM, 1, keepdims=True),
            record(t, ADD, Remote(handle(9)), 2.5),
            record(t, ADD, Remote(handle(9)), 3.5),
            records.release([9, 10]),
        ]
    )
    assert len(records.Reader().parse(body)) == 6  # D C D C C L
    rng = random.Random(37)
    for _ in range(20_000):
        data = bytearray(body)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        data = data[: rng.randint(0, len(data))] if rng.random() < 0.3 else data
        try:
            parsed = records.Reader().parse(bytes(data))
        except records.RecordError:
            continue
        assert all(r[0] in "DCL" for r in parsed)


# -- the frame --------------------------------------------------------------------------------
def read(data: bytes, batches: bool) -> Optional[wire.Frame]:
    return wire.read(io.BytesIO(data).readinto, wire.Limits(), batches=batches)


def test_a_batch_frame_is_read_only_where_batches_are_allowed() -> None:
    data = b"".join(bytes(c) for c in wire.encode_batch(0, b"body"))
    frame = read(data, batches=True)
    assert frame is not None and frame.body == b"body" and frame.meta == {}
    with pytest.raises(wire.ProtocolError, match="reserved header bits"):
        read(data, batches=False)  # the client never takes one from a worker
    answer = bytearray(data)
    answer[4] = wire.RESULT
    with pytest.raises(wire.ProtocolError, match="reserved header bits"):
        read(bytes(answer), batches=True)
    head = wire.HEADER.pack(wire.MAGIC, wire.CALL, wire.BINARY, 0, 0, 4, 1, 0)
    with pytest.raises(wire.ProtocolError, match="has buffers"):
        read(head + wire.BUFLEN.pack(1) + b"body" + b"x", batches=True)


# -- the worker running records ---------------------------------------------------------------
class Session:
    def __init__(self, table: HandleTable) -> None:
        self.poison: Any = None
        self.templates: Dict[int, Any] = {}
        self.warned: List[Dict[str, Any]] = []
        self.failed: List[Any] = []
        self.prefix: Optional[int] = None
        self.release = table.release


def run(table: HandleTable, body: bytes, notice: Any = lambda session: None) -> Session:
    def decode(tree: Any, buffers: List[Any]) -> Any:
        assert tree["$"] == "p"
        module, _, name = tree["p"].rpartition(".")
        return getattr(__import__(module), name)

    def refer(obj: Any, handle: Optional[int]) -> None:
        assert handle is not None
        table.put(handle, obj)

    session = Session(table)
    batch = Batches(table, decode, refer, notice)
    batch.preempted = True  # each call looks for the notice, as after Worker.preempt
    batch.run(session, records.Reader().parse(body))
    return session


def test_the_worker_runs_each_record_as_the_call_it_stands_for() -> None:
    table = HandleTable()
    table.put(5, [3, 1, 2])
    t = templates.Templates()
    body = b"".join(
        [
            t.record({"$": "a", "o": handle(5), "n": "index"}, (1,), {}, 10, "s", reference),
            t.record(
                {"$": "p", "p": "builtins.sorted"},
                (Remote(handle(5)),),
                {"reverse": True},
                11,
                "s",
                reference,
            ),
            t.record({"$": "p", "p": "builtins.round"}, (2.675, 2), {}, 12, "s", reference),
            records.release([5]),
        ]
    )
    session = run(table, body)
    assert table.get(10) == 1 and table.get(11) == [3, 2, 1] and table.get(12) == round(2.675, 2)
    assert session.prefix == 0 and session.failed == []
    with pytest.raises(LookupError):
        table.get(5)  # released after the records that used it


def test_a_failed_record_leaves_its_error_for_the_next_use() -> None:
    table = HandleTable()
    t = templates.Templates()
    body = t.record({"$": "p", "p": "operator.truediv"}, (1, 0), {}, 20, "s", reference)
    session = run(
        table,
        body
        + t.record({"$": "p", "p": "operator.neg"}, (Remote(handle(20)),), {}, 21, "s", reference),
    )
    assert isinstance(table.objects[20][0], Failure) and isinstance(table.objects[21][0], Failure)
    with pytest.raises(ZeroDivisionError):
        table.get(21)  # the second did not run: it holds the first's error
    assert [h for h, _ in session.failed] == [20]
    assert session.poison is not None and session.poison[0] == 20  # raised at the next wait


def test_the_preemption_notice_is_raised_at_a_templated_call() -> None:
    table, told = HandleTable(), []

    def notice(session: Any) -> None:
        if not told:
            told.append(session)
            raise RuntimeError("lease preempted")

    t = templates.Templates()
    body = t.record(ADD, (1, 2), {}, 30, "s", reference) + t.record(
        ADD, (1, 3), {}, 31, "s", reference
    )
    session = run(table, body, notice)
    with pytest.raises(RuntimeError, match="preempted"):
        table.get(30)
    # It poisons as any error of a streamed call: the program is told at its next wait, and
    # what it streamed after that call did not run.
    assert session.poison is not None and session.poison[0] == 30
    with pytest.raises(RuntimeError, match="preempted"):
        table.get(31)


def test_definitions_are_plain_json() -> None:
    t = templates.Templates()
    data = record(t, SUM, 1)
    size = struct.unpack_from("<I", data, 5)[0]
    assert json.loads(data[9 : 9 + size])["f"]["n"] == "sum"


def test_a_call_that_returns_nothing_poisons_its_connection_when_it_raises() -> None:
    table = HandleTable()
    t = templates.Templates()
    fill = {"$": "p", "p": "operator.truediv"}
    body = b"".join(
        [
            t.record(ADD, (1, 2), {}, 40, "s", reference),
            t.record(fill, (1, 0), {}, 41, "s", reference, void=True),
            t.record(ADD, (1, 3), {}, 42, "s", reference),  # after it: not run
            t.record(fill, (4, 2), {}, 43, "s", reference, void=True),
        ]
    )
    session = run(table, body)
    assert table.get(40) == 3 and 41 not in table.objects and 43 not in table.objects
    with pytest.raises(ZeroDivisionError):
        table.get(42)
    assert session.poison is not None and session.poison[0] == 41


def test_a_with_body_s_poison_is_taken_by_its_manager_s_streamed_exit_record() -> None:
    # ``with np.testing.assert_raises(ValueError): a.reshape(4, 4)`` streams the body's call
    # and then the manager's exit as a record: the exit runs on the poisoned connection (its
    # manager sees the body's error) and cures it; the exit of a with begun after the failure
    # does not.
    class Manager:
        def __init__(self) -> None:
            self.exits: List[Any] = []

        def __exit__(self, *exc: Any) -> bool:
            self.exits.append(exc)
            return True

    table = HandleTable()
    manager = Manager()
    table.put(5, manager)
    t = templates.Templates()
    fail = {"$": "p", "p": "operator.truediv"}
    exit_ = {"$": "p", "p": poison.CLEAN_EXIT}
    later = t.record(fail, (1, 0), {}, 41, "s", reference, void=True) + t.record(
        exit_, (Remote(handle(5)), 42), {}, 43, "with", reference, void=True
    )
    session = run(table, later)
    assert manager.exits == [] and session.poison is not None and session.poison[0] == 41
    t = templates.Templates()  # a new session
    body = t.record(fail, (1, 0), {}, 51, "s", reference, void=True) + t.record(
        exit_, (Remote(handle(5)), 50), {}, 52, "with", reference, void=True
    )
    session = run(table, body)
    assert manager.exits == [(None, None, None)] and session.poison is None


def test_a_poisoned_connection_answers_its_next_waiting_request_with_the_error() -> None:
    error = ZeroDivisionError("x")

    class Poisoned:
        def __init__(self) -> None:
            self.poison: Any = (41, error)

    session = Poisoned()
    assert poison.answer_instead(session, {"op": "call", "nr": 1}) == (41, error)
    assert session.poison is not None  # a streamed call does not clear it
    exit_call = {"op": "call", "f": {"$": "p", "p": "radium_interposer.exits.clean_exit"}}
    assert poison.answer_instead(session, {**exit_call, "a": [{"$": "h", "id": 1}, 50]}) == (
        41,
        error,
    )  # the with began after the failure: its exit does not take it
    session.poison = (41, error)
    assert poison.answer_instead(session, {**exit_call, "a": [{"$": "h", "id": 1}, 30]}) is None
    assert session.poison is None  # the body's: its manager's exit sees it
    session.poison = (41, error)  # streamed, the exit runs too
    assert poison.answer_instead(session, {**exit_call, "nr": 1, "a": [{}, 41]}) is None
    assert session.poison is None
    session.poison = (41, error)
    assert poison.answer_instead(session, {"op": "fetch"}) == (41, error)
    assert session.poison is None


# -- waiting records (version 3) ---------------------------------------------------------------
class Answering(Session):
    def __init__(self, table: HandleTable) -> None:
        super().__init__(table)
        self.answers: List[Any] = []
        self.running = 1

    def answer(self, kind: int, call_id: int, reply: Dict[str, Any], buffers: List[Any]) -> None:
        self.answers.append((kind, call_id, reply))


def run_waiting(table: HandleTable, body: bytes, call_id: int) -> Answering:
    def result(obj: Any, handle: int) -> Any:
        if isinstance(obj, list):
            table.put(handle, obj)
            return {"v": {"$": "h", "id": handle}}, []
        return {"v": obj}, []

    session = Answering(table)
    batch = Batches(table, lambda tree, _: None, lambda obj, h: None, lambda s: None, result)
    batch.run(session, records.Reader().parse(body), call_id)
    return session


def test_a_waiting_record_is_answered_after_the_records_before_it_and_before_releases() -> None:
    table = HandleTable()
    table.put(5, [3, 1, 2])
    t = templates.Templates()
    body = b"".join(
        [
            t.record({"$": "a", "o": handle(5), "n": "append"}, (7,), {}, 10, "s", reference),
            t.record({"$": "p", "p": "builtins.len"}, (Remote(handle(5)),), {}, 11, "s", reference),
            records.release([5]),
        ]
    )
    session = run_waiting(table, body, 9)
    assert session.answers == [(wire.RESULT, 9, {"v": 4})]  # after the append, by value
    with pytest.raises(LookupError):
        table.get(5)  # released after the call that used it
    error = run_waiting(table, t.record(ADD, (1, "x"), {}, 12, "s", reference), 3).answers
    assert error[0][:2] == (wire.ERROR, 3) and error[0][2]["type"] == "TypeError"
    assert 12 not in table.objects  # a waiting call's error is its answer, not a Failure kept


def test_a_waiting_record_on_a_poisoned_connection_answers_the_poison_and_cures_it() -> None:
    table = HandleTable()
    t = templates.Templates()
    body = t.record({"$": "p", "p": "operator.truediv"}, (1, 0), {}, 20, "s", reference)
    body += t.record(ADD, (1, 2), {}, 21, "s", reference)
    session = run_waiting(table, body, 4)
    [(kind, call_id, reply)] = session.answers
    assert (kind, call_id, reply["type"], reply["at"]) == (wire.ERROR, 4, "ZeroDivisionError", 20)
    assert session.poison is None and 21 not in table.objects  # it did not run
