"""Leasing on a real PoolState: a grant that comes as its caller goes away is given back."""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator

from radium.pool.leasing import Leasing
from radium.pool.service import Pool
from radium.proto import pool_pb2 as pb
from tests.pool.test_queues import pool


class Context:
    """What the lease stream asks of a grpc.aio servicer context."""

    async def send_initial_metadata(self, metadata: Any) -> None:
        pass


def one_gpu_taken() -> tuple[Leasing, pb.Lease]:
    leasing = Leasing(Pool(pool(gpus=1), clock=lambda: 1.0))
    hog = leasing.allocate_now(pb.AllocateRequest(gpus=1, holder="hog"))
    assert hog is not None
    return leasing, hog


def holders(leasing: Leasing) -> list[str]:
    return sorted(lease.holder for lease in leasing.pool.state.leases.values())


def open_stream(
    leasing: Leasing,
) -> tuple[asyncio.Queue[pb.LeaseCall], AsyncIterator[pb.LeaseReply]]:
    """A lease stream served on this loop: the client's calls go into the queue."""
    sent: asyncio.Queue[pb.LeaseCall] = asyncio.Queue()

    async def calls() -> AsyncIterator[pb.LeaseCall]:
        while True:
            yield await sent.get()

    return sent, leasing.stream(calls(), Context())


async def until_waiting(leasing: Leasing) -> None:
    while not leasing.pool.waiters.pending():
        await asyncio.sleep(0)


def test_a_unary_allocation_cancelled_as_it_is_granted_gives_the_lease_back() -> None:
    async def run() -> list[str]:
        leasing, hog = one_gpu_taken()
        wanted = pb.AllocateRequest(gpus=1, holder="late", wait_seconds=30)
        caller = asyncio.ensure_future(leasing.allocate(wanted))
        await until_waiting(leasing)
        leasing.release(hog.id)  # grants "late" now...
        caller.cancel()  # ...as its caller goes away, before it ran again
        await asyncio.gather(caller, return_exceptions=True)
        assert caller.cancelled()
        return holders(leasing)

    assert asyncio.run(run()) == []


def test_a_stream_that_ends_as_its_allocation_is_granted_gives_the_lease_back() -> None:
    async def run() -> list[str]:
        leasing, hog = one_gpu_taken()
        sent, replies = open_stream(leasing)
        first = asyncio.ensure_future(replies.__anext__())
        wanted = pb.AllocateRequest(gpus=1, holder="late", wait_seconds=30)
        sent.put_nowait(pb.LeaseCall(id=1, allocate=wanted))
        await until_waiting(leasing)
        leasing.release(hog.id)  # grants "late" now...
        first.cancel()  # ...as the client's stream ends, before the reply went out
        await asyncio.gather(first, return_exceptions=True)
        for _ in range(5):  # the cancelled waiting call's own steps
            await asyncio.sleep(0)
        return holders(leasing)

    assert asyncio.run(run()) == []


def test_a_stream_answers_a_waiting_allocation_once_capacity_frees() -> None:
    async def run() -> tuple[pb.LeaseReply, list[str]]:
        leasing, hog = one_gpu_taken()
        sent, replies = open_stream(leasing)
        wanted = pb.AllocateRequest(gpus=1, holder="patient", wait_seconds=30)
        sent.put_nowait(pb.LeaseCall(id=7, allocate=wanted))
        sent.put_nowait(pb.LeaseCall(id=8, release=pb.LeaseRef(lease_id=hog.id)))
        first = await replies.__anext__()  # the release, answered while 7 waits
        second = await replies.__anext__()
        assert first.id == 8 and first.released.released
        await replies.aclose()
        return second, holders(leasing)

    second, held = asyncio.run(run())
    assert second.id == 7 and second.lease.holder == "patient"
    assert held == ["patient"]
