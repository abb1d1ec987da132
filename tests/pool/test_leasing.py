"""Leasing on a real PoolState: a grant that comes as its caller goes away is given back."""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator

import grpc

from radium import rpc
from radium.pool.api.service import PoolService
from radium.pool.core.dispatcher import Dispatcher
from radium.pool.leases.leasing import Leasing
from radium.pool.leases.session import grpc_stream
from radium.proto import pool_pb2 as pb
from tests.pool.test_queues import pool


class Context:
    """What the lease stream asks of a grpc.aio servicer context."""

    def __init__(self, batches: bool = False) -> None:
        self.metadata = (rpc.LEASE_BATCHES,) if batches else ()
        self.answered: Any = None

    def invocation_metadata(self) -> Any:
        return self.metadata

    async def send_initial_metadata(self, metadata: Any) -> None:
        self.answered = tuple(metadata)


def one_gpu_taken() -> tuple[Leasing, pb.Lease]:
    leasing = Leasing(Dispatcher(pool(gpus=1), clock=lambda: 1.0))
    hog = leasing.allocate_now(pb.AllocateRequest(gpus=1, holder="hog"))
    assert hog is not None
    return leasing, hog


def holders(leasing: Leasing) -> list[str]:
    return sorted(lease.holder for lease in leasing.pool.state.leases.values())


def open_stream(
    leasing: Leasing, context: Context | None = None
) -> tuple[asyncio.Queue[pb.LeaseCall], AsyncIterator[pb.LeaseReply]]:
    """A lease stream served on this loop: the client's calls go into the queue."""
    sent: asyncio.Queue[pb.LeaseCall] = asyncio.Queue()

    async def calls() -> AsyncIterator[pb.LeaseCall]:
        while True:
            yield await sent.get()

    return sent, grpc_stream(leasing, calls(), context or Context())


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


def batch(*calls: pb.LeaseCall) -> pb.LeaseCall:
    first, *more = calls
    first.more.extend(more)
    return first


def test_a_batch_is_served_call_by_call_and_answered_in_one_message() -> None:
    async def run() -> tuple[Context, pb.LeaseReply, list[str]]:
        leasing, hog = one_gpu_taken()
        context = Context(batches=True)
        sent, replies = open_stream(leasing, context)
        nested = batch(pb.LeaseCall(id=3, keep_alive=pb.LeaseRef(lease_id=hog.id)))
        nested.more.add(id=9, keep_alive=pb.LeaseRef(lease_id=hog.id))
        sent.put_nowait(
            batch(
                pb.LeaseCall(id=1, release=pb.LeaseRef(lease_id=hog.id)),
                pb.LeaseCall(id=2, allocate=pb.AllocateRequest(gpus=1, holder="next")),
                nested,  # refused alone: a batch within a batch
            )
        )
        reply = await replies.__anext__()
        await replies.aclose()
        return context, reply, holders(leasing)

    context, reply, held = asyncio.run(run())
    assert context.answered == (rpc.LEASE_BATCHES,)
    first, *more = [reply, *reply.more]
    assert (first.id, first.released.released) == (1, True)
    assert [r.id for r in more] == [2, 3]
    assert more[0].lease.holder == "next" and held == ["next"]  # freed by 1, then granted
    assert more[1].error.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert "a batch of its own" in more[1].error.message


def test_replies_are_not_batched_for_a_client_that_did_not_ask() -> None:
    async def run() -> tuple[Context, list[pb.LeaseReply]]:
        leasing, hog = one_gpu_taken()
        context = Context()
        sent, replies = open_stream(leasing, context)
        for call_id in (1, 2, 3):  # all answered in the same turn
            sent.put_nowait(pb.LeaseCall(id=call_id, keep_alive=pb.LeaseRef(lease_id=hog.id)))
        got: list[pb.LeaseReply] = []
        while sum(1 + len(r.more) for r in got) < 3:
            got.append(await asyncio.wait_for(replies.__anext__(), 10))
        await replies.aclose()
        return context, got

    context, got = asyncio.run(run())
    assert context.answered == ()
    assert [(r.id, len(r.more)) for r in got] == [(1, 0), (2, 0), (3, 0)]


def test_a_listing_shows_every_lease_but_no_credential() -> None:
    """Any agent or admin may list the leases; a lease's credential opens its worker on the
    acceptor, so only its holder (in the grant) and its acceptor ever get it."""
    leasing, hog = one_gpu_taken()
    assert hog.credential
    leasing.release(hog.id)
    again = leasing.allocate_now(pb.AllocateRequest(gpus=1, holder="again"))
    assert again is not None
    service = PoolService(leasing.pool)
    listed = asyncio.run(service.ListLeases(pb.ListLeasesRequest(all=True), None)).leases
    assert {(le.id, le.holder) for le in listed} == {(hog.id, "hog"), (again.id, "again")}
    assert [le.credential for le in listed] == ["", ""]
