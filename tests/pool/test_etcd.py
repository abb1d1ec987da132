"""etcd-only parts of the store: the leadership fence, elections, endpoints (a real etcd)."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from radium.errors import ConfigError, NotLeaderError, StoreUnavailableError
from radium.pool.store import leadership
from radium.pool.store.etcd import EtcdStore
from radium.pool.store.etcd_kv import EtcdKV, encode
from tests.etcd_server import EtcdCluster
from tests.pool.test_store_contract import lease
from tests.ports import free_port


def fresh_prefix() -> str:
    return f"/test-{uuid.uuid4().hex}/"


def elect(kv: EtcdKV, prefix: str, address: str, ttl: int = 1) -> leadership.Leadership:
    stop = threading.Event()
    timer = threading.Timer(10, stop.set)
    timer.start()
    try:
        held = leadership.campaign(kv, prefix, address, ttl, stop=stop, poll=0.05)
    finally:
        timer.cancel()
    assert held is not None, f"{address} did not become leader within 10 s"
    return held


def deposed(
    kv: EtcdKV, prefix: str, before: str = ""
) -> tuple[EtcdStore, leadership.Leadership, leadership.Leadership, list[str]]:
    """(the first leader's store, its leadership, the second's, the first's losses): the first
    is deposed by a real election, as if its etcd lease had lapsed while it was paused; with
    ``before``, it stored that lease while it led."""
    first = elect(kv, prefix, "replica-1:7400")
    losses: list[str] = []
    first.on_lost = losses.append
    store = EtcdStore(kv, prefix, first)
    if before:
        store.add_lease(lease(before))
    kv.revoke(first.lease)
    return store, first, elect(kv, prefix, "replica-2:7400"), losses


def test_a_deposed_leader_can_change_nothing(etcd: EtcdCluster) -> None:
    kv, prefix = EtcdKV(etcd.endpoints), fresh_prefix()
    store, first, second, losses = deposed(kv, prefix, before="l-before")
    assert second.revision > first.revision
    assert leadership.current_leader(kv, prefix) == "replica-2:7400"
    with pytest.raises(NotLeaderError, match="no longer the leader"):
        store.add_lease(lease("l-after"))
    with pytest.raises(NotLeaderError):
        store.end_leases([lease("l-before", state="released", ended_at=5.0)])
    assert losses == ["another replica holds the leadership now"]
    assert [x.id for x in EtcdStore(kv, prefix).load()[1]] == ["l-before"]
    # The fence is what refused: the same writes without it go through.
    EtcdStore(kv, prefix).add_lease(lease("l-after"))
    assert {x.id for x in EtcdStore(kv, prefix).load()[1]} == {"l-before", "l-after"}
    second.resign()
    kv.close()


def test_a_deposed_leader_s_deferred_changes_fail_their_commit(etcd: EtcdCluster) -> None:
    kv, prefix = EtcdKV(etcd.endpoints), fresh_prefix()
    store, _, second, losses = deposed(kv, prefix)
    try:
        with store.deferring():
            store.add_lease(lease("l-1"))
        with pytest.raises(NotLeaderError):
            store.commit()
        with store.deferring():
            store.add_lease(lease("l-2"))
        # A change that commits the deferred ones first fails; so does the commit their
        # answers wait for, which must not tell of them.
        with pytest.raises(NotLeaderError):
            store.end_leases([lease("l-2", state="released", ended_at=2.0)])
        with pytest.raises(NotLeaderError):
            store.commit()
        store.commit()  # said once: nothing is pending now
        assert losses and EtcdStore(kv, prefix).load() == ([], [])
    finally:
        second.resign()
        kv.close()


def test_a_leader_kept_alive_keeps_the_key_and_a_dead_one_loses_it(etcd: EtcdCluster) -> None:
    kv, prefix = EtcdKV(etcd.endpoints), fresh_prefix()
    alive = elect(kv, prefix, "alive:1")
    alive.start(lambda why: None)
    time.sleep(2.5)  # 2.5 TTLs
    assert alive.held and leadership.current_leader(kv, prefix) == "alive:1"
    alive.resign()
    assert leadership.current_leader(kv, prefix) == ""  # resigning hands over at once

    dead = elect(kv, prefix, "dead:1")  # never kept alive: it died right after winning
    started = time.monotonic()
    successor = elect(kv, prefix, "successor:1")
    waited = time.monotonic() - started
    assert 0.3 < waited < 5, waited  # the key outlived its holder for about a TTL
    assert successor.revision > dead.revision
    successor.resign()
    kv.close()


def test_calls_move_past_a_dead_endpoint(etcd: EtcdCluster) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    kv = EtcdKV([dead, *etcd.endpoints], timeout=1)
    prefix = fresh_prefix()
    EtcdStore(kv, prefix).add_lease(lease("l-1"))
    assert [x.id for x in EtcdStore(kv, prefix).load()[1]] == ["l-1"]
    kv.close()


def test_no_etcd_is_one_clear_error_and_changes_nothing() -> None:
    endpoints = [f"http://127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]
    store = EtcdStore(EtcdKV(endpoints, timeout=1), fresh_prefix())
    with pytest.raises(StoreUnavailableError) as caught:
        store.add_lease(lease("l-1"))
    line = caught.value.one_line()
    assert "no endpoint of" in line and endpoints[0] in line and "[pool.etcd]" in line
    assert "\n" not in line


@pytest.mark.parametrize("endpoint", ["ftp://h:1", "http://no-port", "://x"])
def test_malformed_endpoints_are_refused(endpoint: str) -> None:
    with pytest.raises(ConfigError, match=r"pool\.etcd\.endpoints"):
        EtcdKV([endpoint])
    with pytest.raises(ConfigError, match="at least one"):
        EtcdKV([])


class StalledEtcd:
    """Keep-alives that get no answer until ``answers_at`` (an etcd election, or a cut link)."""

    def __init__(self, stalled_for: float, timeout: float) -> None:
        self.timeout = timeout
        self.answers_at = time.monotonic() + stalled_for

    def keep_alive(self, lease: int) -> int:
        if time.monotonic() < self.answers_at:
            raise StoreUnavailableError("etcd lease keep-alive got no answer (no quorum?)")
        return 1

    def revoke(self, lease: int) -> None:
        pass


@pytest.mark.parametrize("stalled_for, kept", [(1.3, True), (60.0, False)])
def test_a_leader_rides_out_an_etcd_election_but_not_a_longer_silence(
    stalled_for: float, kept: bool
) -> None:
    """TTL 1 s and calls of 1 s: a 1.3 s stall (longer than the TTL, as an etcd election after
    its leader was killed) keeps the leadership; silence past TTL + timeout loses it."""
    losses: list[str] = []
    held = leadership.Leadership(StalledEtcd(stalled_for, timeout=1.0), "k", 1, 7, ttl=1)
    held.start(losses.append)
    time.sleep(2.8)
    held.resign()
    assert (losses == []) is kept, losses
    if not kept:
        assert losses[0].startswith("etcd unreachable for 2s")


def test_each_prune_compacts_the_history_the_last_one_saw(etcd: EtcdCluster) -> None:
    kv, prefix = EtcdKV(etcd.endpoints), fresh_prefix()
    store = EtcdStore(kv, prefix)
    store.add_lease(lease("l-1"))
    before = kv.revision(prefix)
    store.end_leases([lease("l-1", state="released", ended_at=5.0)])
    assert store.prune(ended_before=0.0) == 0  # notes where history stands: compacts nothing
    assert len(history(kv, prefix, before)) == 1  # l-1 as it was at `before`: still there
    store.prune(ended_before=0.0)
    with pytest.raises(StoreUnavailableError, match="compacted"):
        history(kv, prefix, before)
    store.prune(ended_before=0.0)  # compacting to where etcd already is: no error
    assert [x.id for x in store.ended_leases(5)] == ["l-1"]  # values stay
    kv.close()


def history(kv: EtcdKV, prefix: str, revision: int) -> list[object]:
    """The leases under ``prefix`` as they were at ``revision``."""

    def call(client: object) -> list[object]:
        request = {"key": encode(f"{prefix}leases/"), "range_end": encode(f"{prefix}leases0")}
        answer = client.post(client.get_url("/kv/range"), json={**request, "revision": revision})
        return list(answer.get("kvs", []))

    return kv._call("range", call)


def test_a_range_over_several_pages_reads_every_key_once_in_order(etcd: EtcdCluster) -> None:
    kv, prefix = EtcdKV(etcd.endpoints, page=3), fresh_prefix()
    store = EtcdStore(kv, prefix)
    ids = [f"l-{n:02d}" for n in range(8)]
    for lease_id in ids:
        store.add_lease(lease(lease_id))
    store.add_lease(lease("l-other"))  # under the prefix, not this kind's
    assert [x.id for x in store.load()[1]] == [*ids, "l-other"]
    assert [kv.key for kv in kv.range(f"{prefix}leases/l-0")] == [
        f"{prefix}leases/{lease_id}" for lease_id in ids
    ]
    kv.close()


def test_a_loaded_store_reads_its_ended_leases_beside_and_trims_once_read(
    etcd: EtcdCluster,
) -> None:
    kv, prefix = EtcdKV(etcd.endpoints), fresh_prefix()
    first = EtcdStore(kv, prefix, ended_kept=2)
    for n in range(4):
        first.add_lease(lease(f"l-{n}"))
    first.end_leases([lease(f"l-{n}", state="released", ended_at=float(n)) for n in (0, 1)])
    leader = EtcdStore(kv, prefix, ended_kept=2)  # as a new leader: loads, then serves
    leader.load()
    assert leader.ended_log.reading is not None
    leader.ended_log.reading.result(timeout=10)
    leader.end_leases([lease("l-2", state="released", ended_at=2.0)])
    assert [x.id for x in EtcdStore(kv, prefix).ended_leases(10)] == ["l-2", "l-1"]
    kv.close()
