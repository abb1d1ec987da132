"""An acceptor's watch stream: when it takes batches, one message per turn of the pool's loop,
and at most one per pace."""

from __future__ import annotations

import asyncio

import pytest

from radium.pool.api.acceptor_service import AcceptorService
from radium.pool.core.dispatcher import Dispatcher
from radium.pool.model import Lease, Request
from radium.proto import pool_pb2 as pb
from tests.pool.test_queues import pool


@pytest.mark.parametrize("batches", [True, False])
def test_assignments_queued_in_one_turn_go_in_one_message_if_asked(batches: bool) -> None:
    async def run() -> list[pb.Assignment]:
        served = Dispatcher(pool(gpus=4), clock=lambda: 1.0)
        request = pb.WatchRequest(name="a", batches=batches)
        watch = AcceptorService(served, 1.0).Watch(request, None)
        first = asyncio.ensure_future(watch.__anext__())
        await asyncio.sleep(0)  # it waits for the pool's first news
        granted = [served.grant(Request(gpus=1, holder="h")) for _ in range(3)]
        served.ended(served.state.end(granted[:1], "released", 1.0))
        messages = [await first]
        while sum(1 + len(m.then) for m in messages) < 4:
            messages.append(await watch.__anext__())
        await watch.aclose()
        return messages

    messages = asyncio.run(run())
    told = [(a.kind, a.lease.id) for m in messages for a in (m, *m.then)]
    assert len(told) == 4 and len(messages) == (1 if batches else 4)
    assert [kind for kind, _ in told] == [pb.Assignment.GRANTED] * 3 + [pb.Assignment.REVOKED]
    assert told[0][1] == told[3][1]  # in the order the pool told them


def test_a_batching_stream_sends_what_its_pace_gathers_in_one_message() -> None:
    async def run() -> list[int]:
        served = Dispatcher(pool(gpus=8), clock=lambda: 1.0)
        request = pb.WatchRequest(name="a", batches=True)
        watch = AcceptorService(served, 1.0, watch_pace=0.5).Watch(request, None)
        first = asyncio.ensure_future(watch.__anext__())
        await asyncio.sleep(0)
        served.grant(Request(gpus=1, holder="h"))
        sizes = [1 + len((await first).then)]  # at once: nothing was sent before
        second = asyncio.ensure_future(watch.__anext__())
        for _ in range(3):  # each in a turn of its own, within the pace
            served.grant(Request(gpus=1, holder="h"))
            await asyncio.sleep(0)
        sizes.append(1 + len((await second).then))
        await watch.aclose()
        return sizes

    assert asyncio.run(run()) == [1, 3]


def test_a_lease_granted_between_registration_and_watch_reaches_the_acceptor() -> None:
    """The acceptor learns of leases by its registration's answer, then by its stream; one
    granted in between (here, a waiting request served by the registration itself, then one
    more) is kept for the stream that follows (it was lost: the holder was refused)."""

    async def run() -> tuple[list[str], list[str], list[str]]:
        served = Dispatcher(pool(gpus=0), clock=lambda: 1.0)
        service = AcceptorService(served, 1.0)
        waiting: asyncio.Future[Lease] = asyncio.get_running_loop().create_future()
        served.waiters.add(Request(gpus=1, holder="w"), waiting)
        devices = [pb.Device(id=i, vendor="nvidia", model="T4", memory_mib=1000) for i in "01"]
        offer = pb.Acceptor(name="b", data_address="b:1", devices=devices)
        reply = await service.Register(pb.RegisterRequest(acceptor=offer), None)
        granted = [waiting.result().id, served.grant(Request(gpus=1, holder="h")).id]
        watch = service.Watch(pb.WatchRequest(name="b", batches=True), None)
        try:
            first = await asyncio.wait_for(watch.__anext__(), 5.0)
        finally:
            await watch.aclose()
        told = [a.lease.id for a in (first, *first.then) if a.kind == pb.Assignment.GRANTED]
        return [lease.id for lease in reply.leases], granted, told

    answered, granted, told = asyncio.run(run())
    assert answered == [] and told == granted
