"""Group commit (docs/store.md): a store's deferred changes (SQLite and etcd), one commit per
loop turn, and lease-stream answers that wait for it."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import sqlite3
import threading
from pathlib import Path
from typing import AsyncIterator, Callable, ContextManager

import pytest

from radium.errors import (
    AlreadyExistsError,
    RadiumError,
    StoreUnavailableError,
)
from radium.pool.core.dispatcher import Dispatcher
from radium.pool.leases.leasing import Leasing
from radium.pool.leases.session import grpc_stream
from radium.pool.model import RELEASED
from radium.pool.store.commits import Committed, Deferrable, GroupCommit
from radium.pool.store.sqlite import SQLiteStore
from radium.proto import pool_pb2 as pb
from tests.pool.conftest import OpenSQLite, OpenStore, loaded
from tests.pool.test_leasing import Context, open_stream
from tests.pool.test_queues import pool
from tests.pool.test_store_contract import lease


def committed_ids(db: Path) -> list[str]:
    """What another process would find in the database: committed rows only."""
    with sqlite3.connect(db) as other:
        return sorted(row[0] for row in other.execute("SELECT id FROM leases"))


def test_deferred_changes_commit_together_and_only_on_commit(tmp_path: Path) -> None:
    db = tmp_path / "pool.db"
    store = SQLiteStore(str(db))
    opened: list[int] = []
    store.on_open = lambda: opened.append(1)
    with store.deferring():
        store.add_lease(lease("l-1"))
        store.add_lease(lease("l-2"))
        with pytest.raises(AlreadyExistsError):  # a failed change undoes itself alone
            store.add_lease(lease("l-1"))
    assert opened == [1] and committed_ids(db) == []
    store.commit()
    assert committed_ids(db) == ["l-1", "l-2"]
    with store.deferring():
        store.add_lease(lease("l-3"))
    store.add_lease(lease("l-4"))  # a change that commits takes the deferred ones with it
    assert committed_ids(db) == ["l-1", "l-2", "l-3", "l-4"]
    with store.deferring():
        store.add_lease(lease("l-5"))
    store.close()  # and so does closing
    assert committed_ids(db) == ["l-1", "l-2", "l-3", "l-4", "l-5"]


def test_deferred_changes_reach_either_store_only_on_commit(open_store: OpenStore) -> None:
    store, other = open_store("pool"), open_store("pool")  # other: what a restart would load
    assert isinstance(store, Deferrable)
    opened: list[int] = []
    store.on_open = lambda: opened.append(1)
    many = [lease(f"l-{n:03}") for n in range(150)]  # more than one etcd transaction's worth
    with store.deferring():
        # Granted and ended in the same turn: etcd refuses a transaction naming a key twice.
        store.add_lease(many[0])
        store.end_leases([dataclasses.replace(many[0], state=RELEASED, ended_at=2.0)])
        for x in many[1:]:
            store.add_lease(x)
    assert opened == [1] and other.load()[1] == []
    store.commit()
    assert sorted(x.id for x in other.load()[1]) == [x.id for x in many[1:]]
    assert [x.id for x in loaded(other).ended_leases(5)] == ["l-000"]
    with store.deferring():
        store.add_lease(lease("l-late"))
    store.end_leases([dataclasses.replace(many[1], state=RELEASED, ended_at=3.0)])
    assert "l-late" in {x.id for x in other.load()[1]}  # an immediate change takes them along
    assert opened == [1, 1]
    store.close()


def test_the_changes_of_one_turn_share_the_commit_of_the_next(tmp_path: Path) -> None:
    db = tmp_path / "pool.db"
    store = SQLiteStore(str(db))
    told: list[tuple[str, RadiumError | None, list[str]]] = []

    async def run() -> None:
        commits = GroupCommit(store, failed=lambda error: pytest.fail(str(error)))
        for name in ("a", "b"):  # two calls answered in the same turn
            with commits.deferred():
                store.add_lease(lease(f"l-{name}"))
            commits.when_committed(
                lambda error, name=name: told.append((name, error, committed_ids(db)))
            )
        assert told == [] and committed_ids(db) == []
        await asyncio.sleep(0)
        assert told == [("a", None, ["l-a", "l-b"]), ("b", None, ["l-a", "l-b"])]
        commits.when_committed(lambda error: told.append(("c", error, [])))  # nothing pending
        assert told[-1] == ("c", None, [])

    asyncio.run(run())
    store.close()


class FullDisk(SQLiteStore):
    """A database whose disk fills up once ``full`` is set: its commits fail."""

    full = False

    def _send_held(self) -> None:
        if self.full and self._db.in_transaction:
            self._db.execute("ROLLBACK")
            raise StoreUnavailableError("the pool's database did not commit: disk is full")
        super()._send_held()


def test_held_changes_a_later_change_failed_to_commit_fail_their_own_commit(
    tmp_path: Path,
) -> None:
    store = FullDisk(str(tmp_path / "pool.db"))
    with store.deferring():
        store.add_lease(lease("l-1"))
    store.full = True
    with pytest.raises(StoreUnavailableError):  # it commits the held change with its own
        store.end_leases([dataclasses.replace(lease("l-2"), state=RELEASED, ended_at=2.0)])
    with pytest.raises(StoreUnavailableError):  # their answers must not be told of them
        store.commit()
    store.full = False
    store.commit()  # said once: nothing is held now
    assert committed_ids(tmp_path / "pool.db") == []
    store.close()


def test_a_failed_commit_fails_the_answers_waiting_for_it_and_stops_the_pool(
    tmp_path: Path,
) -> None:
    stopped: list[StoreUnavailableError] = []

    async def run() -> list[pb.LeaseReply]:
        store = FullDisk(str(tmp_path / "pool.db"))
        state = pool(gpus=1, store=store)
        store.full = True
        commits = GroupCommit(store, stopped.append)
        leasing = Leasing(Dispatcher(state, clock=lambda: 1.0, commits=commits))
        sent, replies = open_stream(leasing)
        sent.put_nowait(pb.LeaseCall(id=1, allocate=pb.AllocateRequest(gpus=1, holder="x")))
        sent.put_nowait(pb.LeaseCall(id=2, keep_alive=pb.LeaseRef(lease_id="l-none")))
        answers = [await replies.__anext__(), await replies.__anext__()]
        await replies.aclose()
        store.full = False
        store.close()
        return answers

    granted, refused = asyncio.run(run())
    assert granted.id == 1 and granted.WhichOneof("result") == "error"  # not told of a lease
    assert "did not commit" in granted.error.message
    assert refused.id == 2 and refused.WhichOneof("result") == "error"
    assert len(stopped) == 1


def test_a_stream_answers_only_what_is_committed(tmp_path: Path, sqlite_store: OpenSQLite) -> None:
    db = tmp_path / "pool.db"

    async def run() -> tuple[list[pb.LeaseReply], list[list[str]]]:
        state = pool(gpus=2, store=sqlite_store(db))
        commits = GroupCommit(state.store, lambda error: pytest.fail(str(error)))
        leasing = Leasing(Dispatcher(state, clock=lambda: 1.0, commits=commits))
        sent, replies = open_stream(leasing)
        for n in (1, 2):
            sent.put_nowait(pb.LeaseCall(id=n, allocate=pb.AllocateRequest(gpus=1, holder="x")))
        answers, seen = [], []
        for _ in (1, 2):
            answers.append(await replies.__anext__())
            seen.append(committed_ids(db))  # as the client is told
        await replies.aclose()
        return answers, seen

    answers, seen = asyncio.run(run())
    assert [a.id for a in answers] == [1, 2]  # in the order asked
    for answer, rows in zip(answers, seen):
        assert answer.lease.id in rows


class HeldCommits:
    """Commits that happen when the test says so."""

    def __init__(self) -> None:
        self.waiting: list[Committed] = []
        self.told: list[Callable[[], None]] = []

    def deferred(self) -> ContextManager[None]:
        return contextlib.nullcontext()

    def when_committed(self, then: Committed) -> None:
        self.waiting.append(then)

    def commit(self) -> None:
        waiting, self.waiting = self.waiting, []
        for then in waiting:
            then(None)
        for told in self.told:
            told()


def test_a_stream_s_answers_wait_for_the_commit() -> None:
    async def run() -> None:
        commits = HeldCommits()
        leasing = Leasing(Dispatcher(pool(gpus=2), clock=lambda: 1.0, commits=commits))
        sent, replies = open_stream(leasing)
        sent.put_nowait(pb.LeaseCall(id=1, allocate=pb.AllocateRequest(gpus=1, holder="x")))
        first = asyncio.ensure_future(replies.__anext__())
        await asyncio.sleep(0.05)
        assert not first.done() and len(commits.waiting) == 1
        commits.commit()
        assert (await first).lease.holder == "x"
        lease_id = (await first).lease.id
        unary = asyncio.ensure_future(leasing.durably(lambda: leasing.release(lease_id)))
        await asyncio.sleep(0.05)
        assert not unary.done()  # a unary call's answer waits too
        commits.commit()
        assert (await unary).released
        await replies.aclose()

    asyncio.run(run())


def test_a_stream_answers_only_what_either_store_committed(open_store: OpenStore) -> None:
    """On etcd the batch is sent by the commit thread (docs/store.md), on SQLite on the loop."""
    store, other = open_store("pool"), open_store("pool")  # other: what a restart would load
    assert isinstance(store, Deferrable)

    async def run() -> tuple[list[pb.LeaseReply], list[set[str]]]:
        commits = GroupCommit(store, lambda error: pytest.fail(str(error)))
        leasing = Leasing(Dispatcher(pool(gpus=3, store=store), clock=lambda: 1.0, commits=commits))
        sent, replies = open_stream(leasing)
        answers, seen = [], []
        for n in (1, 2, 3):  # 2 and 3 come while 1's batch may be in flight
            sent.put_nowait(pb.LeaseCall(id=n, allocate=pb.AllocateRequest(gpus=1, holder="x")))
            if n != 2:
                answers.append(await replies.__anext__())
                seen.append({x.id for x in other.load()[1]})  # as the client is told
        answers.append(await replies.__anext__())
        seen.append({x.id for x in other.load()[1]})
        await replies.aclose()
        commits.close()
        return answers, seen

    answers, seen = asyncio.run(run())
    assert sorted(a.id for a in answers) == [1, 2, 3]
    for answer, stored in zip(answers, seen):
        assert answer.lease.id in stored
    store.close()


class Gated(Deferrable):
    """A store whose batches, sent by the commit thread, land one per ``allow.release()``."""

    sends_in_background = True

    def __init__(self) -> None:
        super().__init__()
        self.held: list[str] = []
        self.landed: list[list[str]] = []
        self.allow = threading.Semaphore(0)
        self.fail = False

    def change(self, name: str) -> None:
        if self._deferring:
            self._hold()
            self.held.append(name)
        else:
            self._commit_ahead()
            self.landed.append([name])

    def _send_held(self) -> None:
        self._send_batch(self._take_held())

    def _take_held(self) -> list[str]:
        held, self.held = self.held, []
        return held

    def _send_batch(self, batch: list[str]) -> None:
        if batch:
            assert self.allow.acquire(timeout=10), "the test never let this batch land"
            if self.fail:
                raise StoreUnavailableError("etcd transaction got no answer (no quorum?)")
            self.landed.append(batch)


async def until(done: Callable[[], bool]) -> None:
    for _ in range(1000):  # a hang guard, not a timing: each step waits for the commit thread
        if done():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("never happened")


def test_the_loop_holds_the_next_batch_while_one_is_in_flight_and_they_land_in_order() -> None:
    store = Gated()
    told: list[tuple[str, RadiumError | None, list[list[str]]]] = []

    async def run() -> None:
        commits = GroupCommit(store, failed=lambda error: pytest.fail(str(error)))

        def call(name: str) -> None:
            with commits.deferred():
                store.change(name)
            commits.when_committed(
                lambda error: told.append((name, error, [list(b) for b in store.landed]))
            )

        call("a")
        await asyncio.sleep(0)  # the next turn hands [a] to the commit thread
        call("b")  # served meanwhile, held for the next batch
        call("c")
        await asyncio.sleep(0.05)
        assert told == [] and store.landed == [] and store.held == ["b", "c"]
        store.allow.release()  # [a] lands; [b, c] goes out only now
        await until(lambda: len(told) == 1)
        assert told == [("a", None, [["a"]])] and store.held == []
        store.allow.release()
        await until(lambda: len(told) == 3)
        assert told[1:] == [("b", None, [["a"], ["b", "c"]]), ("c", None, [["a"], ["b", "c"]])]
        call("d")
        await asyncio.sleep(0)  # [d] in flight
        threading.Timer(0.05, store.allow.release).start()
        store.change("e")  # an immediate change waits for [d] before it lands
        assert store.landed[-2:] == [["d"], ["e"]]
        await until(lambda: len(told) == 4)
        commits.close()

    asyncio.run(run())


def test_a_batch_that_fails_in_flight_fails_the_next_and_every_later_answer() -> None:
    store = Gated()
    stopped: list[RadiumError] = []
    told: list[tuple[str, RadiumError | None]] = []

    async def run() -> None:
        commits = GroupCommit(store, failed=stopped.append)

        def call(name: str) -> None:
            with commits.deferred():
                store.change(name)
            commits.when_committed(lambda error: told.append((name, error)))

        call("a")
        await asyncio.sleep(0)
        call("b")  # held behind [a]: it may rest on [a]'s changes
        store.fail = True
        store.allow.release()
        await until(lambda: len(told) == 2)
        commits.when_committed(lambda error: told.append(("later", error)))
        commits.close()

    asyncio.run(run())
    assert [name for name, _ in told] == ["a", "b", "later"]
    assert all(isinstance(error, StoreUnavailableError) for _, error in told)
    assert len(stopped) == 1 and store.landed == []


def test_a_stream_half_closed_before_its_commit_still_gets_every_answer() -> None:
    """The client's last calls, then its end of the stream, may come before their commit (on
    etcd the commit thread's round trip is longer than a read): the stream ends only after."""

    async def run() -> list[pb.LeaseReply]:
        commits = HeldCommits()
        leasing = Leasing(Dispatcher(pool(gpus=2), clock=lambda: 1.0, commits=commits))

        async def calls() -> AsyncIterator[pb.LeaseCall]:
            for n in (1, 2):
                yield pb.LeaseCall(id=n, allocate=pb.AllocateRequest(gpus=1, holder="x"))

        replies = grpc_stream(leasing, calls(), Context())
        answers = asyncio.ensure_future(_all(replies))
        await asyncio.sleep(0.05)  # the calls are read, and the end of them
        assert not answers.done()
        commits.commit()
        return await answers

    answers = asyncio.run(run())
    assert [a.id for a in answers] == [1, 2] and all(a.lease.id for a in answers)


async def _all(replies: AsyncIterator[pb.LeaseReply]) -> list[pb.LeaseReply]:
    return [reply async for reply in replies]
