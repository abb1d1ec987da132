"""Queues: fair shares, quotas, reclaim and preemption, in the style of KAI's scenario tests."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from radium.errors import CapacityError, InvalidRequestError, QuotaError
from radium.pool.core import queues
from radium.pool.core.queues import Queues
from radium.pool.core.state import PoolState
from radium.pool.model import (
    PREEMPTED,
    PREEMPTING,
    AcceptorState,
    Device,
    DeviceState,
    Queue,
    Request,
)
from radium.pool.store.base import Store
from radium.pool.store.sqlite import SQLiteStore
from tests.pool.conftest import OpenStore

GRACE = 5.0


def acceptor(name: str, n: int, memory: int = 1000) -> AcceptorState:
    devices = {str(i): DeviceState(Device(str(i), "nvidia", "T4", memory)) for i in range(n)}
    return AcceptorState(name, f"{name}:1", {}, devices)


def pool(*configured: Queue, gpus: int = 4, store: Store | None = None) -> PoolState:
    store = store or SQLiteStore(":memory:")
    state = PoolState(store, lease_ttl=1000, heartbeat_timeout=1000, now=0)
    for q in configured:
        state.store.save_queue(q)
    state.set_queues(Queues(configured))
    state.register(acceptor("a", gpus), 0)
    return state


def usage_matches(state: PoolState) -> None:
    """The kept counters equal a recount, and no device holds more than it has."""
    assert {k: v for k, v in state.used.items() if abs(v) > 1e-9} == pytest.approx(
        {k: v for k, v in state.queues.usage(state.leases.values()).items() if v}
    )
    for acc in state.acceptors.values():
        for device in acc.devices.values():
            assert 0 <= device.used_mib <= device.device.memory_mib
            assert device.used_mib == sum(device.holders.values())


# -- fair shares ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "configured, demand, expected",
    [
        # deserved first, the rest by weight
        (
            [Queue("a", deserved=2, weight=1), Queue("b", deserved=2, weight=3)],
            {"a": 10, "b": 10},
            {"a": 3, "b": 5},
        ),
        # a queue that asks for less gets what it asks; the other takes the rest
        ([Queue("a", deserved=4), Queue("b", deserved=4)], {"a": 1, "b": 10}, {"a": 1, "b": 7}),
        # limits cap over-quota shares
        (
            [Queue("a", deserved=1, limit=2), Queue("b", deserved=1)],
            {"a": 10, "b": 10},
            {"a": 2, "b": 6},
        ),
        # higher-priority queues get idle GPUs first
        (
            [Queue("a", deserved=1, priority=1), Queue("b", deserved=1)],
            {"a": 10, "b": 10},
            {"a": 7, "b": 1},
        ),
        # a zero weight borrows nothing
        (
            [Queue("a", deserved=1, weight=0), Queue("b", deserved=1)],
            {"a": 10, "b": 10},
            {"a": 1, "b": 7},
        ),
    ],
)
def test_fair_shares(
    configured: list[Queue], demand: dict[str, float], expected: dict[str, float]
) -> None:
    book = Queues([*configured, Queue("default", deserved=0, weight=0)])
    shares = book.fair_shares(8, demand)
    assert {k: shares[k] for k in expected} == pytest.approx(expected)


def test_departments_divide_their_share_among_projects() -> None:
    book = Queues(
        [
            Queue("research", deserved=6),
            Queue("vision", deserved=4, parent="research"),
            Queue("nlp", deserved=2, parent="research"),
            Queue("prod", deserved=2),
            Queue("default", weight=0),
        ]
    )
    shares = book.fair_shares(10, {"vision": 10, "nlp": 10, "prod": 10})
    assert shares["research"] == pytest.approx(6 + 2 * 0.5)
    assert shares["vision"] + shares["nlp"] == pytest.approx(shares["research"])
    assert shares["vision"] > shares["nlp"]


def test_the_implicit_default_queue_deserves_what_nobody_was_promised() -> None:
    book = Queues([Queue("a", deserved=3)])
    assert book.deserved(book.resolve(""), 8) == 5
    assert [q.name for q in book.chain("")] == ["default"]


@pytest.mark.parametrize(
    "queue",
    [
        Queue(""),
        Queue("a b"),
        Queue("a", deserved=-1),
        Queue("a", weight=float("nan")),
        Queue("a", limit=-2),
        Queue("a", deserved=3, limit=2),
        Queue("a", parent="nowhere"),
    ],
)
def test_malformed_queues_are_refused(queue: Queue) -> None:
    with pytest.raises(InvalidRequestError):
        queues.checked(queue, {})


def test_a_queue_cannot_be_its_own_ancestor() -> None:
    existing = {"a": Queue("a", parent="b"), "b": Queue("b")}
    with pytest.raises(InvalidRequestError, match="own ancestor"):
        queues.checked(Queue("b", parent="a"), existing)


# -- admission -----------------------------------------------------------------------------


def test_unknown_queue_and_priority_are_refused_and_change_nothing() -> None:
    state = pool(Queue("a", deserved=2))
    with pytest.raises(InvalidRequestError, match="no queue 'nope'"):
        state.allocate(Request(gpus=1, queue="nope"), 0)
    with pytest.raises(InvalidRequestError, match="unknown priority class 'urgent'"):
        state.allocate(Request(gpus=1, queue="a", priority="urgent"), 0)
    assert not state.leases
    usage_matches(state)


def test_limits_refuse_at_once_or_for_now() -> None:
    state = pool(Queue("a", deserved=1, limit=2))
    with pytest.raises(InvalidRequestError, match="more than queue 'a' may ever hold"):
        state.allocate(Request(gpus=3, queue="a"), 0)
    state.allocate(Request(gpus=2, queue="a"), 0)
    with pytest.raises(QuotaError, match="at its limit"):
        state.allocate(Request(fraction=0.5, queue="a"), 0)
    assert len(state.leases) == 1


def test_non_preemptible_leases_use_only_the_deserved_quota() -> None:
    state = pool(Queue("a", deserved=1.5), Queue("default", weight=1))
    state.allocate(Request(gpus=1, queue="a", priority="build"), 0)
    state.allocate(Request(fraction=0.5, queue="a", priority="inference"), 0)
    with pytest.raises(QuotaError, match="not preemptible"):
        state.allocate(Request(fraction=0.25, queue="a", priority="build"), 0)
    # preemptible work may still borrow idle GPUs
    state.allocate(Request(gpus=2, queue="a", priority="train"), 0)
    usage_matches(state)


# -- reclaim and preemption ----------------------------------------------------------------


def borrowed_everything() -> tuple[PoolState, list[str]]:
    """Queue A (deserves 1) holds all 4 GPUs, one of them non-preemptible; B deserves 3."""
    state = pool(Queue("a", deserved=1), Queue("b", deserved=3), Queue("default", weight=0))
    ids = [state.allocate(Request(gpus=1, queue="a", priority="build"), 0).id]
    for t in (1, 2, 3):
        ids.append(state.allocate(Request(gpus=1, queue="a"), float(t)).id)
    return state, ids


def test_a_queue_below_its_quota_reclaims_borrowed_leases() -> None:
    state, (firm, *borrowed) = borrowed_everything()
    with pytest.raises(CapacityError):
        state.allocate(Request(gpus=2, queue="b"), 10)
    victims = state.reclaim(Request(gpus=2, queue="b"), 10, GRACE, {"b": 2})
    # the newest preemptible leases go first; the non-preemptible one is never taken
    assert {v.id for v in victims} == set(borrowed[-2:])
    for v in victims:
        assert v.shown_state == PREEMPTING and v.preempted_for == "b"
        assert v.expires_at == 10 + GRACE
    assert state.keep_alive(victims[0].id, 11) == 10 + GRACE  # notice is not extended
    ended = state.reap(10 + GRACE + 0.1)
    assert {e.state for e in ended} == {PREEMPTED}
    lease = state.allocate(Request(gpus=2, queue="b"), 16)
    assert lease.queue == "b"
    assert firm in state.leases
    usage_matches(state)


def test_reclaim_takes_only_the_leases_the_request_needs_room_from() -> None:
    # a: half a GPU it may not lose (build) and a borrowed half beside it on device 0, and a
    # borrowed whole device 1. b's whole GPU needs device 1 only: the newer half, tried first,
    # would not have made room (the build half stays), so it is given back.
    state = pool(Queue("a", deserved=1), Queue("b", deserved=1), Queue("default"), gpus=2)
    state.allocate(Request(fraction=0.5, queue="a", priority="build"), 0)
    whole = state.allocate(Request(gpus=1, queue="a"), 1)
    half = state.allocate(Request(fraction=0.5, queue="a"), 2)
    assert set(half.devices) != set(whole.devices)
    victims = state.reclaim(Request(gpus=1, queue="b"), 10, GRACE, {"b": 1})
    assert [v.id for v in victims] == [whole.id]
    assert not half.preempted_at
    usage_matches(state)


def test_reclaim_never_takes_a_queue_below_its_deserved_quota() -> None:
    state = pool(Queue("a", deserved=3), Queue("b", deserved=1), Queue("default", weight=0))
    for _ in range(3):
        state.allocate(Request(gpus=1, queue="a"), 0)
    state.allocate(Request(gpus=1, queue="b"), 0)
    # b is at its fair share already (1 of 1 deserved, nobody idle to lend)
    assert state.reclaim(Request(gpus=1, queue="b"), 1, GRACE, {"b": 1}) == []
    assert not any(lease.preempted_at for lease in state.leases.values())


def test_over_quota_requests_do_not_reclaim() -> None:
    state, _ = borrowed_everything()
    state.set_queues(Queues([Queue("a", deserved=1), Queue("b", deserved=0.5)]))
    # 2 GPUs would put b past its fair share (its 0.5 plus half of the idle 2.5)
    assert state.reclaim(Request(gpus=2, queue="b"), 10, GRACE, {"b": 2}) == []


def test_inside_a_queue_higher_priority_preempts_lower_preemptible() -> None:
    state = pool(Queue("a", deserved=4), Queue("default", weight=0), gpus=2)
    batch = state.allocate(Request(gpus=1, queue="a", priority="batch"), 0)
    train = state.allocate(Request(gpus=1, queue="a", priority="train"), 1)
    # equal priority never preempts
    assert state.reclaim(Request(gpus=1, queue="a", priority="batch"), 2, GRACE, {"a": 3}) == []
    victims = state.reclaim(Request(gpus=1, queue="a", priority="build"), 2, GRACE, {"a": 3})
    assert [v.id for v in victims] == [batch.id]
    assert not train.preempted_at


def test_preemption_survives_a_restart(open_store: OpenStore) -> None:
    state = pool(Queue("a", deserved=1), Queue("b", deserved=3), store=open_store("pool"))
    for _ in range(4):
        state.allocate(Request(gpus=1, queue="a"), 0)
    (victim,) = state.reclaim(Request(gpus=1, queue="b"), 10, GRACE, {"b": 1})
    state.store.close()
    again = PoolState(open_store("pool"), lease_ttl=1000, heartbeat_timeout=1000, now=12)
    assert {q.name for q in again.queues.all()} == {"a", "b", "default"}
    restored = again.leases[victim.id]
    assert restored.preempted_for == "b" and restored.expires_at == 10 + GRACE
    assert again.used["a"] == 4


# -- invariants over random sequences ------------------------------------------------------

ACTIONS = st.lists(
    st.tuples(
        st.sampled_from(["allocate", "release", "reclaim", "reap"]),
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from(["build", "train", "batch", "inference"]),
        st.sampled_from([1, 2, 0.25, 0.5, 0.75]),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(ACTIONS)
def test_no_device_over_committed_and_firm_leases_never_preempted(
    actions: list[tuple[str, str, str, float]],
) -> None:
    state = pool(
        Queue("a", deserved=2, weight=2),
        Queue("b", deserved=1, limit=3),
        Queue("c", deserved=0.5),
        gpus=4,
    )
    now = 0.0
    for action, queue, priority, amount in actions:
        now += 1
        request = (
            Request(gpus=int(amount), queue=queue, priority=priority)
            if amount >= 1
            else Request(fraction=amount, queue=queue, priority=priority)
        )
        if action == "allocate":
            with contextlib.suppress(CapacityError):
                state.allocate(request, now)
        elif action == "release" and state.leases:
            state.release(sorted(state.leases)[int(amount * 7) % len(state.leases)], now)
        elif action == "reclaim":
            with contextlib.suppress(CapacityError, InvalidRequestError):
                state.reclaim(request, now, GRACE, {queue: state.size_of(request)})
        elif action == "reap":
            state.reap(now + GRACE)
        for lease in state.leases.values():
            if not queues.priority_class(lease.priority).preemptible:
                assert not lease.preempted_at
        usage_matches(state)
