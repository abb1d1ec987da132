from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from radium.errors import CapacityError, LeaseNotFoundError, StoreUnavailableError
from radium.pool.core.dispatcher import Dispatcher
from radium.pool.core.state import PoolState
from radium.pool.model import (
    EXPIRED,
    RELEASED,
    REVOKED,
    AcceptorState,
    Device,
    DeviceState,
    Request,
)
from radium.pool.store.sqlite import SQLiteStore
from tests.pool.conftest import OpenSQLite, OpenStore


def acceptor(name: str = "a", n: int = 2) -> AcceptorState:
    devices = {str(i): DeviceState(Device(str(i), "cpu", "cpu", 1000)) for i in range(n)}
    return AcceptorState(name, f"{name}:1", {}, devices)


def pool(open_store: OpenStore, now: float = 0.0) -> PoolState:
    """The pool named "pool" on the store under test (again: a restart)."""
    return PoolState(open_store("pool"), lease_ttl=10, heartbeat_timeout=5, now=now)


def test_leases_survive_a_restart_and_are_not_given_twice(open_store: OpenStore) -> None:
    first = pool(open_store)
    first.register(acceptor(), 0)
    a = first.allocate(Request(gpus=1, holder="h1"), 0)
    b = first.allocate(Request(fraction=0.5, holder="h2"), 0)
    first.store.close()
    second = pool(open_store, now=100)  # long after the TTL: the restart grants a grace period
    assert set(second.leases) == {a.id, b.id}
    assert second.leases[a.id].expires_at == 110
    second.reap(101)
    assert set(second.leases) == {a.id, b.id}
    second.register(acceptor(), 101)
    with pytest.raises(CapacityError):
        second.allocate(Request(gpus=1), 101)  # device 0 is a's, device 1 is half b's
    assert second.allocate(Request(fraction=0.5), 101).devices == {"1": 500}


def test_a_restored_acceptor_keeps_its_leases_but_gets_none_until_it_registers(
    open_store: OpenStore,
) -> None:
    first = pool(open_store)
    first.register(acceptor(), 0)
    held = first.allocate(Request(fraction=0.5, holder="h"), 0)
    first.store.close()
    second = pool(open_store, now=50)
    restored = second.acceptors["a"]
    assert restored.up and not restored.serving  # its address may be a dead process's
    with pytest.raises(CapacityError, match="no matching acceptor is up"):
        second.allocate(Request(fraction=0.25), 50)
    assert not second.heartbeat("a", 51)  # it must register again first
    assert set(second.leases) == {held.id}
    moved = acceptor()
    moved.data_address = "a:2"  # the new process listens elsewhere
    second.register(moved, 52)
    assert second.leases[held.id].data_address == "a:2"
    assert second.allocate(Request(fraction=0.25), 52).data_address == "a:2"


def test_a_restored_acceptor_that_never_registers_is_marked_down(open_store: OpenStore) -> None:
    first = pool(open_store)
    first.register(acceptor(), 0)
    held = first.allocate(Request(gpus=1), 0)
    first.store.close()
    second = pool(open_store, now=50)
    assert [le.id for le in second.reap(50 + 6)] == [held.id]  # heartbeat_timeout is 5
    assert not second.acceptors["a"].up


def test_release_is_idempotent_and_frees(open_store: OpenStore) -> None:
    state = pool(open_store)
    state.register(acceptor(n=1), 0)
    lease = state.allocate(Request(gpus=1), 0)
    assert state.release(lease.id, 1) is not None
    assert state.release(lease.id, 2) is None
    assert state.allocate(Request(gpus=1), 3).devices == {"0": 1000}
    assert [le.state for le in state.store.ended_leases(10)] == [RELEASED]


def test_ttl_expiry_and_keepalive(open_store: OpenStore) -> None:
    state = pool(open_store)
    state.register(acceptor(), 0)
    kept, dropped = state.allocate(Request(gpus=1), 0), state.allocate(Request(gpus=1), 0)
    assert state.keep_alive(kept.id, 8) == 18
    for now in (9, 11):
        state.heartbeat("a", now)
    assert [le.id for le in state.reap(11)] == [dropped.id]
    assert dropped.state == EXPIRED
    with pytest.raises(LeaseNotFoundError):
        state.keep_alive(dropped.id, 12)


def test_silent_acceptor_is_marked_down_and_its_leases_revoked(open_store: OpenStore) -> None:
    state = pool(open_store)
    state.register(acceptor("a"), 0)
    state.register(acceptor("b"), 0)
    on_a = state.allocate(Request(gpus=2), 0)
    state.keep_alive(on_a.id, 5)
    state.heartbeat("b", 5)
    ended = state.reap(6)
    assert [(le.id, le.state) for le in ended] == [(on_a.id, REVOKED)]
    assert not state.acceptors["a"].up and state.acceptors["b"].up
    assert state.heartbeat("a", 7) is False  # must register again
    active, revoked = state.register(acceptor("a"), 8)
    assert (active, revoked) == ([], [])
    assert state.acceptors["a"].up


def test_reregistering_without_a_device_revokes_its_lease(open_store: OpenStore) -> None:
    state = pool(open_store)
    state.register(acceptor("a", 2), 0)
    lease = state.allocate(Request(gpus=2), 0)
    active, revoked = state.register(acceptor("a", 1), 1)
    assert active == [] and [le.id for le in revoked] == [lease.id]
    assert state.allocate(Request(gpus=1), 2).devices == {"0": 1000}


def test_ended_leases_are_pruned_after_retention(open_store: OpenStore) -> None:
    state = pool(open_store)
    state.register(acceptor(), 0)
    old, recent = state.allocate(Request(gpus=1), 0), state.allocate(Request(gpus=1), 0)
    state.release(old.id, 10)
    state.release(recent.id, 100)
    assert state.store.prune(50) == 1
    assert [le.id for le in state.store.ended_leases(10)] == [recent.id]


def test_the_reaper_prunes_with_the_retention_it_is_given() -> None:
    state = PoolState(SQLiteStore(":memory:"), lease_ttl=10, heartbeat_timeout=1000, now=0)
    state.register(acceptor(), 0)
    old, recent = state.allocate(Request(gpus=1), 0), state.allocate(Request(gpus=1), 0)
    state.release(old.id, 10)
    state.release(recent.id, 100)
    served = Dispatcher(state, clock=lambda: 150.0)

    async def reap() -> None:  # at 150 a retention of 100 s forgets what ended before 50
        reaper = asyncio.ensure_future(served.reap_forever(0.01, retention=100.0))
        while len(state.store.ended_leases(10)) > 1:
            await asyncio.sleep(0.01)
        reaper.cancel()

    asyncio.run(asyncio.wait_for(reap(), 10))
    assert [le.id for le in state.store.ended_leases(10)] == [recent.id]


class FailingPrune(SQLiteStore):
    def prune(self, ended_before: float) -> int:
        raise StoreUnavailableError("the disk is gone")


def test_a_prune_that_fails_does_not_stop_the_reaper() -> None:
    state = PoolState(FailingPrune(":memory:"), lease_ttl=10, heartbeat_timeout=1000, now=0)
    state.register(acceptor(), 0)
    now = [0.0]
    served = Dispatcher(state, clock=lambda: now[0])
    lease = served.grant(Request(gpus=1, ttl=5))

    async def reap() -> None:
        now[0] = 100_000.0  # past its TTL; every tick of the reaper prunes first, and fails
        reaper = asyncio.ensure_future(served.reap_forever(0.01))
        while lease.state != EXPIRED:
            await asyncio.sleep(0.01)
        reaper.cancel()

    asyncio.run(asyncio.wait_for(reap(), 10))


def test_the_database_of_credentials_is_private(tmp_path: Path, sqlite_store: OpenSQLite) -> None:
    db = tmp_path / "pool.db"
    db.touch(mode=0o644)
    state = PoolState(sqlite_store(db), lease_ttl=10, heartbeat_timeout=5, now=0)
    state.register(acceptor(), 0)
    state.allocate(Request(gpus=1), 0)
    for name in ("pool.db", "pool.db-wal", "pool.db-shm"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o600, name
