"""The store contract (docs/store.md), run against SQLite and a real etcd alike."""

from __future__ import annotations

import dataclasses

import pytest

from radium.errors import AlreadyExistsError
from radium.pool.model import (
    ACTIVE,
    EXPIRED,
    RELEASED,
    AcceptorState,
    Device,
    DeviceState,
    ImageStatus,
    Lease,
    Queue,
)
from tests.pool.conftest import OpenStore, loaded


def acceptor(name: str = "a", devices: tuple[str, ...] = ("0", "1")) -> AcceptorState:
    states = {d: DeviceState(Device(d, "nvidia", "T4", 16000, {"slot": d})) for d in devices}
    return AcceptorState(name, f"{name}:7401", {"zone": "z1"}, states, cpu_milli=4000)


def lease(id: str, expires_at: float = 100.0, **changes: object) -> Lease:
    made = Lease(
        id=id,
        acceptor="a",
        data_address="a:7401",
        devices={"0": 8000},
        fraction=0.5,
        holder="node-1",
        queue="team",
        credential=f"secret-{id}",
        ttl=30.0,
        expires_at=expires_at,
        created_at=1.0,
        image="img:1",
        worker="container",
        cpu_milli=500,
        priority="batch",
    )
    return dataclasses.replace(made, **changes)  # type: ignore[arg-type]


def test_an_empty_store_loads_nothing(open_store: OpenStore) -> None:
    store = open_store("pool")
    assert store.load() == ([], [])
    assert store.load_queues() == []
    assert store.load_images() == ([], [])
    assert store.ended_leases(10) == []


def test_acceptors_come_back_unregistered_with_their_devices(open_store: OpenStore) -> None:
    store = open_store("pool")
    store.save_acceptor(acceptor("b", ("1", "0")))
    store.save_acceptor(acceptor("a", ("0", "1", "2")))
    store.save_acceptor(acceptor("a", ("0", "2")))  # registered again: device 1 is gone
    store.set_up("b", False)
    store.set_up("nobody", False)  # unknown: nothing happens
    acceptors, leases = open_store("pool").load()
    assert leases == []
    by_name = {a.name: a for a in acceptors}
    assert set(by_name) == {"a", "b"}
    a = by_name["a"]
    assert list(a.devices) == ["0", "2"]
    assert a.devices["2"].device == Device("2", "nvidia", "T4", 16000, {"slot": "2"})
    assert (a.data_address, dict(a.labels), a.up, a.cpu_milli) == (
        "a:7401",
        {"zone": "z1"},
        True,
        4000,
    )
    assert not a.registered and not by_name["b"].up


def test_a_lease_is_kept_whole_and_never_added_twice(open_store: OpenStore) -> None:
    store = open_store("pool")
    granted = lease("l-1")
    store.add_lease(granted)
    with pytest.raises(AlreadyExistsError):
        store.add_lease(lease("l-1", holder="someone else"))
    _, leases = open_store("pool").load()
    assert leases == [granted]


def test_ended_leases_leave_the_active_set_newest_first(open_store: OpenStore) -> None:
    store = open_store("pool")
    for n in range(4):
        store.add_lease(lease(f"l-{n}"))
    ended = [lease(f"l-{n}", state=RELEASED, ended_at=10.0 + n) for n in range(3)]
    store.end_leases(ended[:1])
    store.end_leases(ended[1:])
    store.end_leases([])
    reopened = open_store("pool")
    assert [x.id for x in reopened.load()[1]] == ["l-3"]
    loaded(reopened)
    assert [(x.id, x.state, x.ended_at) for x in reopened.ended_leases(2)] == [
        ("l-2", RELEASED, 12.0),
        ("l-1", RELEASED, 11.0),
    ]
    assert reopened.prune(ended_before=11.5) == 2
    assert [x.id for x in reopened.ended_leases(10)] == ["l-2"]
    assert reopened.prune(ended_before=11.5) == 0


def test_ended_leases_page_from_a_cursor_alike_before_and_after_a_reopen(
    open_store: OpenStore,
) -> None:
    """A listing's pages come from memory (radium.pool.leases.listing): what a reopened store reads
    back must be every field of the leases that ended."""
    store = open_store("pool")
    made = [lease(f"l-{n}", holder=f"node-{n}", expires_at=50.0 + n) for n in range(5)]
    for one in made:
        store.add_lease(one)
    ended = [dataclasses.replace(x, state=RELEASED, ended_at=10.0 + n) for n, x in enumerate(made)]
    store.end_leases(ended)
    reopened = loaded(open_store("pool"))
    for each in (store, reopened):
        first = each.ended_leases(2)
        assert [x.id for x in first] == ["l-4", "l-3"]
        after = (first[-1].ended_at, first[-1].id)
        assert [x.id for x in each.ended_leases(2, before=after)] == ["l-2", "l-1"]
        assert [x.id for x in each.ended_leases(2, before=(11.0, "l-1"))] == ["l-0"]
    assert reopened.ended_leases(10) == ended[::-1]


def test_a_store_keeps_the_newest_ended_leases_and_forgets_the_oldest_as_more_end(
    open_store: OpenStore,
) -> None:
    store = open_store("pool", ended_kept=2)
    for n in range(6):
        store.add_lease(lease(f"l-{n}"))
    for n in range(3):
        store.end_leases([lease(f"l-{n}", state=RELEASED, ended_at=10.0 + n)])
    reopened = open_store("pool", ended_kept=2)  # its log is read from the store
    assert [x.id for x in reopened.ended_leases(10)] == ["l-2", "l-1"]
    # More end at once than are kept: the oldest of them are never stored as ended at all.
    reopened.end_leases([lease(f"l-{n}", state=EXPIRED, ended_at=10.0 + n) for n in (3, 4, 5)])
    assert [x.id for x in open_store("pool").ended_leases(10)] == ["l-5", "l-4"]
    assert [x.id for x in open_store("pool").load()[1]] == []


def test_a_store_forgets_the_oldest_ended_leases_a_batch_at_a_time(open_store: OpenStore) -> None:
    """Up to 1 % of the bound (2 of 200) stay beyond it, then go in one write."""
    store = open_store("pool", ended_kept=200)
    for n in range(202):
        store.add_lease(lease(f"l-{n:03d}"))
    store.end_leases([lease(f"l-{n:03d}", state=RELEASED, ended_at=n) for n in range(200)])
    store.end_leases([lease("l-200", state=RELEASED, ended_at=200)])
    assert len(open_store("pool").ended_leases(300)) == 201
    store.end_leases([lease("l-201", state=RELEASED, ended_at=201)])
    kept = [x.id for x in open_store("pool").ended_leases(300)]
    assert len(kept) == 200
    assert kept[-1] == "l-002"  # the two oldest went together


def test_a_restart_extends_standing_leases_but_not_notices(open_store: OpenStore) -> None:
    store = open_store("pool")
    store.add_lease(lease("l-short", expires_at=50))
    store.add_lease(lease("l-long", expires_at=500))
    store.add_lease(lease("l-noticed", expires_at=50))
    store.mark_preempted([lease("l-noticed", expires_at=60, preempted_at=40, preempted_for="b")])
    store.extend_active(200)
    leases = {x.id: x for x in open_store("pool").load()[1]}
    assert leases["l-short"].expires_at == 200
    assert leases["l-long"].expires_at == 500
    noticed = leases["l-noticed"]
    assert (noticed.expires_at, noticed.preempted_at, noticed.preempted_for) == (60, 40, "b")
    assert all(x.state == ACTIVE for x in leases.values())


def test_queues_are_replaced_and_dropped(open_store: OpenStore) -> None:
    store = open_store("pool")
    store.save_queue(Queue("team-b", deserved=2))
    store.save_queue(Queue("team-a", deserved=1, weight=2, limit=4, priority=1, parent="org"))
    store.save_queue(Queue("team-b", deserved=3))
    store.save_queue(Queue("gone"))
    store.drop_queue("gone")
    store.drop_queue("never-was")
    assert open_store("pool").load_queues() == [
        Queue("team-a", deserved=1, weight=2, limit=4, priority=1, parent="org"),
        Queue("team-b", deserved=3),
    ]


def test_images_and_their_status_per_acceptor(open_store: OpenStore) -> None:
    store = open_store("pool")
    for ref in ("registry:5000/b/img:2", "a/img:1", "gone:1"):
        store.save_image(ref, 5.0)
    store.drop_image("gone:1")
    store.save_image_status(ImageStatus("a/img:1", "acc-1", "pulling", 0.5))
    store.save_image_status(ImageStatus("a/img:1", "acc-1", "ready", 1.0, "sha256:ab"))
    store.save_image_status(ImageStatus("a/img:1", "acc-2", "failed", error="no space"))
    store.save_image_status(ImageStatus("registry:5000/b/img:2", "acc-1"))
    store.drop_image_status("registry:5000/b/img:2", "acc-1")
    refs, statuses = open_store("pool").load_images()
    assert refs == ["a/img:1", "registry:5000/b/img:2"]
    assert sorted(statuses, key=lambda s: s.acceptor) == [
        ImageStatus("a/img:1", "acc-1", "ready", 1.0, "sha256:ab"),
        ImageStatus("a/img:1", "acc-2", "failed", error="no space"),
    ]


def test_pools_apart_share_nothing(open_store: OpenStore) -> None:
    open_store("one").add_lease(lease("l-1"))
    open_store("one").end_leases([lease("l-1", state=EXPIRED, ended_at=3.0)])
    assert open_store("two").load() == ([], [])
    assert open_store("two").ended_leases(5) == []


def test_many_leases_end_and_extend_at_once(open_store: OpenStore) -> None:
    """More than one etcd transaction holds (its limit is 128 operations)."""
    store = open_store("pool")
    many = [lease(f"l-{n:03}", expires_at=10) for n in range(150)]
    for x in many:
        store.add_lease(x)
    store.extend_active(20)
    assert {x.expires_at for x in open_store("pool").load()[1]} == {20}
    store.end_leases([dataclasses.replace(x, state=RELEASED, ended_at=30.0) for x in many])
    assert open_store("pool").load()[1] == []
    assert len(store.ended_leases(1000)) == 150
