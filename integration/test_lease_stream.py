"""The lease stream (docs/lease-stream.md) against a real pool and acceptor."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import AsyncIterator, Iterator

import grpc
import pytest

from integration.pool import AGENT_TOKEN, PoolCluster, serving, wait_until
from radium import rpc
from radium.errors import (
    AuthError,
    CapacityError,
    DeadlineError,
    LeaseNotFoundError,
    PermissionDeniedError,
    UnavailableError,
)
from radium.leaseclient.stream import LeaseStream
from radium.proto import pool_pb2 as pb
from radium.proto import pool_pb2_grpc as pb_grpc


@pytest.fixture(scope="module")
def pool(
    pool_store: list[str] | None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PoolCluster]:
    """A pool (tokens) on each store in turn, and one acceptor of two devices."""
    with serving(tmp_path_factory.mktemp("stream"), pool_store) as cluster:
        yield cluster


def active(pool: PoolCluster, holder: str) -> list[pb.Lease]:
    client = pool.client()
    try:
        return [lease for lease in client.leases() if lease.holder == holder]
    finally:
        client.close()


def waiting_requests(pool: PoolCluster) -> int:
    client = pool.client()
    try:
        return sum(queue.waiting for queue in client.queues())
    finally:
        client.close()


class Session:
    """One channel and one lease stream on it, closed together."""

    def __init__(self, pool: PoolCluster, timeout: float = 5.0, token: str = AGENT_TOKEN) -> None:
        self.channel = rpc.aio_channel(pool.address, pool.tls_config("agent"))
        self.leases = LeaseStream(self.channel, rpc.metadata(token), "pool", timeout)

    async def __aenter__(self) -> LeaseStream:
        return self.leases

    async def __aexit__(self, *_: object) -> None:
        await self.leases.close()
        await self.channel.close()


def test_allocate_keep_alive_and_release_on_one_stream(pool: PoolCluster) -> None:
    async def run() -> None:
        async with Session(pool) as leases:
            lease = await leases.allocate(pb.AllocateRequest(gpus=1, holder="s-basic"))
            assert [le.id for le in active(pool, "s-basic")] == [lease.id]
            kept = await leases.keep_alive(lease.id)
            assert kept.state == "active" and kept.expires_at > time.time() + 20
            assert await leases.release(lease.id) is True
            assert await leases.release(lease.id) is False  # idempotent, as the unary call
            with pytest.raises(LeaseNotFoundError, match=f"lease {lease.id} is not active"):
                await leases.keep_alive(lease.id)
            with pytest.raises(CapacityError, match="no capacity for 3 whole GPUs"):
                await leases.allocate(pb.AllocateRequest(gpus=3, holder="s-basic"))
            # The stream outlived the calls that failed.
            again = await leases.allocate(pb.AllocateRequest(gpus=2, holder="s-basic"))
            assert await leases.release(again.id) is True
        assert active(pool, "s-basic") == []

    asyncio.run(run())


def test_a_waiting_allocation_holds_up_no_other_call(pool: PoolCluster) -> None:
    async def run() -> None:
        async with Session(pool) as leases:
            both = await leases.allocate(pb.AllocateRequest(gpus=2, holder="s-hog"))
            waiting = asyncio.ensure_future(
                leases.allocate(pb.AllocateRequest(gpus=1, holder="s-waiter", wait_seconds=20))
            )
            await asyncio.sleep(0.3)
            assert not waiting.done()
            # Answered while the allocation ahead of it on the stream waits.
            assert (await leases.keep_alive(both.id)).state == "active"
            assert await leases.release(both.id) is True
            granted = await asyncio.wait_for(waiting, 10)
            assert granted.holder == "s-waiter" and len(granted.device_ids) == 1
            assert await leases.release(granted.id) is True

    asyncio.run(run())


def test_a_stream_closed_while_waiting_withdraws_its_allocation(pool: PoolCluster) -> None:
    async def run() -> None:
        async with Session(pool) as holder:
            both = await holder.allocate(pb.AllocateRequest(gpus=2, holder="s-hog2"))
            async with Session(pool) as leaver:
                waiting = asyncio.ensure_future(
                    leaver.allocate(pb.AllocateRequest(gpus=1, holder="s-gone", wait_seconds=20))
                )
                await asyncio.sleep(0.3)
            # The leaver's stream is closed: its call failed, and the pool forgot the request.
            with pytest.raises(UnavailableError, match="the lease stream was closed"):
                await waiting
            # The pool hears of the closed stream on another connection than the release's:
            # wait until it has (its request no longer waits), or up to 10 s.
            for _ in range(200):
                if not waiting_requests(pool):
                    break
                await asyncio.sleep(0.05)
            assert await holder.release(both.id) is True
            await asyncio.sleep(0.5)
        assert active(pool, "s-gone") == []

    asyncio.run(run())


def test_an_allocation_given_up_on_is_released_when_it_comes(pool: PoolCluster) -> None:
    async def run() -> None:
        async with Session(pool, timeout=0.0001) as impatient:
            with pytest.raises(DeadlineError, match="allocate unanswered"):
                await impatient.allocate(pb.AllocateRequest(gpus=1, holder="s-late"))
            # The grant comes after the deadline; the stream gives the lease back at once.
            granted = False

            def released() -> bool:
                nonlocal granted
                client = pool.client()
                try:
                    mine = [le for le in client.leases(all_=True) if le.holder == "s-late"]
                finally:
                    client.close()
                granted = granted or bool(mine)
                return bool(mine) and all(le.state == "released" for le in mine)

            for _ in range(100):
                if released():
                    break
                await asyncio.sleep(0.05)
            assert granted and released()

    asyncio.run(run())


def test_a_wrong_token_ends_the_stream_with_one_line(pool: PoolCluster) -> None:
    async def run() -> None:
        async with Session(pool, token="not-the-token") as refused:
            with pytest.raises(AuthError, match="token not accepted"):
                await refused.allocate(pb.AllocateRequest(gpus=1, holder="s-intruder"))
        assert "refused /radium.v1.Pool/Leases" in pool.pool.log_tail(50)
        assert active(pool, "s-intruder") == []

    asyncio.run(run())


async def raw(
    pool: PoolCluster, calls: list[pb.LeaseCall], batches: bool = False
) -> list[pb.LeaseReply]:
    """``calls`` on one stream with the stub alone (no client-side checks), then half-close;
    ``batches``: the stream is opened asking for batched replies."""
    metadata = rpc.metadata(AGENT_TOKEN) + ((rpc.LEASE_BATCHES,) if batches else ())
    async with rpc.aio_channel(pool.address) as channel:

        async def sent() -> AsyncIterator[pb.LeaseCall]:
            for call in calls:
                yield call

        stream = pb_grpc.PoolStub(channel).Leases(sent(), metadata=metadata)
        assert rpc.takes_lease_batches(await stream.initial_metadata()) is batches
        return [reply async for reply in stream]


def test_a_batch_of_calls_is_answered_in_order_in_one_message(pool: PoolCluster) -> None:
    call = pb.LeaseCall(id=1, allocate=pb.AllocateRequest(gpus=1, holder="s-batch"))
    call.more.add(id=2, allocate=pb.AllocateRequest(gpus=1, holder="s-batch"))
    call.more.add(id=3, release=pb.LeaseRef(lease_id="l-nonexistent"))
    (message,) = asyncio.run(raw(pool, [call], batches=True))
    replies = [message, *message.more]
    assert [r.id for r in replies] == [1, 2, 3]
    granted = [r.lease.id for r in replies[:2]]
    assert all(granted) and sorted(granted) == sorted(le.id for le in active(pool, "s-batch"))
    assert replies[2].released.released is False
    client = pool.client()
    try:
        assert [client.release(lease_id) for lease_id in granted] == [True, True]
    finally:
        client.close()


def test_many_calls_at_once_on_one_stream_go_batched_and_all_come_back(pool: PoolCluster) -> None:
    async def cycle(leases: LeaseStream) -> str:
        lease = await leases.allocate(pb.AllocateRequest(fraction=0.01, holder="s-many"))
        assert await leases.release(lease.id) is True
        return lease.id

    async def run() -> tuple[bool, list[str]]:
        async with Session(pool) as leases:
            await leases.connect()
            return leases.batching, await asyncio.gather(*(cycle(leases) for _ in range(60)))

    batching, granted = asyncio.run(run())
    assert batching is True
    assert len(set(granted)) == 60 and active(pool, "s-many") == []


def test_malformed_calls_are_refused_one_by_one(pool: PoolCluster) -> None:
    hold = pb.AllocateRequest(gpus=2, holder="s-raw")
    wait = pb.AllocateRequest(gpus=1, holder="s-raw-wait", wait_seconds=1)
    replies = asyncio.run(
        raw(
            pool,
            [
                pb.LeaseCall(id=1),  # no operation
                pb.LeaseCall(id=2, allocate=hold),
                pb.LeaseCall(id=3, allocate=wait),  # waits: no capacity left
                pb.LeaseCall(id=3, keep_alive=pb.LeaseRef(lease_id="l-x")),  # 3 is in flight
                pb.LeaseCall(id=4, release=pb.LeaseRef(lease_id="l-nonexistent")),
            ],
        )
    )
    by_id: dict[int, list[pb.LeaseReply]] = {}
    for reply in replies:
        by_id.setdefault(reply.id, []).append(reply)
    invalid = grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert [r.error.code for r in by_id[1]] == [invalid]
    assert "names no operation" in by_id[1][0].error.message
    granted = by_id[2][0].lease
    assert len(granted.device_ids) == 2
    # The in-flight id's duplicate is refused; the waiting call still ends, out of capacity.
    codes = sorted(r.error.code for r in by_id[3])
    exhausted = grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
    assert codes == sorted([invalid, exhausted])
    assert by_id[4][0].released.released is False
    client = pool.client()
    try:
        assert client.release(granted.id) is True
    finally:
        client.close()


def test_an_acceptor_certificate_may_not_open_a_lease_stream(tmp_path: Path) -> None:
    cluster = PoolCluster(tmp_path, tls=True)
    try:
        cluster.start_pool()

        async def run() -> None:
            async with rpc.aio_channel(cluster.address, cluster.tls_config("acceptors")) as ch:
                leases = LeaseStream(ch, (), "pool", 5)
                with pytest.raises(PermissionDeniedError, match="an acceptor certificate"):
                    await leases.allocate(pb.AllocateRequest(gpus=1))
                await leases.close()

        asyncio.run(run())
        wait_until(
            lambda: "refused /radium.v1.Pool/Leases" in cluster.pool.log_tail(50),
            5,
            "the refusal logged",
        )
    finally:
        cluster.stop()


def test_a_pool_gone_under_an_accepted_tls_stream_is_not_a_certificate_refusal(
    tmp_path: Path,
) -> None:
    # grpc reports both a refused handshake and a connection closed later as "Socket closed":
    # a stream the pool had accepted proved the certificate, so its end is the pool going away.
    cluster = PoolCluster(tmp_path, tls=True)
    try:
        cluster.start_pool()
        cluster.start_acceptor("acc", devices=1)
        cluster.wait_up("acc")

        async def run() -> None:
            async with rpc.aio_channel(cluster.address, cluster.tls_config("agent")) as ch:
                leases = LeaseStream(ch, (), "pool", 5, tls=True)
                await leases.allocate(pb.AllocateRequest(gpus=1))  # the one device
                # The pool holds the next allocation open on the accepted stream.
                waiting = asyncio.ensure_future(
                    leases.allocate(pb.AllocateRequest(gpus=1, wait_seconds=30))
                )
                admin = cluster.client(cert="admin")
                for _ in range(200):  # its write goes out from this loop: poll, don't block it
                    if await asyncio.to_thread(lambda: sum(q.waiting for q in admin.queues())):
                        break
                    await asyncio.sleep(0.05)
                admin.close()
                cluster.pool.kill(signal.SIGKILL)
                with pytest.raises(UnavailableError):  # not AuthError: no certificate refused
                    await waiting
                await leases.close()

        asyncio.run(run())
    finally:
        cluster.stop()
