"""The lease stream's window (docs/lease-stream.md, "Window"): a client has at most so many
calls unanswered; the pool ends a gRPC stream past it with RESOURCE_EXHAUSTED and a lease
socket with the same status as reply 0, our clients wait for a place instead, and a front
reads no calls of a client that reads none of its replies."""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any, AsyncIterator, Awaitable, Callable, TypeVar

import grpc
import grpc.aio
import pytest

from radium.errors import CapacityError, DeadlineError
from radium.leaseclient import wire
from radium.leaseclient.socket import LeaseSocket
from radium.leaseclient.stream import LeaseStream
from radium.pool.core.dispatcher import Dispatcher
from radium.pool.leases import connection as lease_connection
from radium.pool.leases import front as lease_front
from radium.pool.leases.leasing import Leasing
from radium.pool.leases.session import LeaseSession, grpc_stream
from radium.proto import pool_pb2 as pb
from radium.proto import pool_pb2_grpc as pb_grpc
from tests.pool.test_lease_socket import TOKEN, listening, raw, read_frame
from tests.pool.test_queues import pool

T = TypeVar("T")
WINDOW = 4


class Servicer(pb_grpc.PoolServicer):
    """Only the lease stream, with a window of :data:`WINDOW`."""

    def __init__(self, leasing: Leasing) -> None:
        self.leasing = leasing

    async def Leases(
        self, requests: AsyncIterator[pb.LeaseCall], context: Any
    ) -> AsyncIterator[pb.LeaseReply]:
        async for reply in grpc_stream(self.leasing, requests, context, WINDOW):
            yield reply


def one_gpu_taken() -> tuple[Leasing, pb.Lease]:
    leasing = Leasing(Dispatcher(pool(gpus=1), clock=lambda: 1.0))
    hog = leasing.allocate_now(pb.AllocateRequest(gpus=1, holder="hog"))
    assert hog is not None
    return leasing, hog


def waiting(call_id: int) -> pb.LeaseCall:
    wanted = pb.AllocateRequest(gpus=1, holder=f"w{call_id}", wait_seconds=30)
    return pb.LeaseCall(id=call_id, allocate=wanted)


def on_grpc(test: Callable[[Leasing, pb.Lease, grpc.aio.Channel], Awaitable[T]]) -> T:
    """``test`` with a pool whose one GPU is taken, serving the lease stream on loopback."""

    async def run() -> T:
        leasing, hog = one_gpu_taken()
        server = grpc.aio.server()
        pb_grpc.add_PoolServicer_to_server(Servicer(leasing), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        try:
            return await test(leasing, hog, channel)
        finally:
            await channel.close()
            await server.stop(0)

    return asyncio.run(run())


def test_a_stream_past_its_window_ends_with_resource_exhausted_and_others_serve_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def test(leasing: Leasing, hog: pb.Lease, channel: grpc.aio.Channel) -> None:
        stream = pb_grpc.PoolStub(channel).Leases()
        await stream.initial_metadata()
        for call_id in range(1, WINDOW + 2):  # one past the window: each waits for the GPU
            await stream.write(waiting(call_id))
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            await stream.read()
        assert ended.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert ended.value.details() == (
            f"lease stream: {WINDOW + 1} calls unanswered, over the limit of {WINDOW} a stream "
            "may have in flight; a client waits for replies before it sends more "
            "(docs/lease-stream.md)"
        )
        while leasing.pool.waiters.pending():  # its waiting allocations are withdrawn
            await asyncio.sleep(0.01)
        other = LeaseStream(channel, (), "pool")
        assert await other.release(hog.id) is True
        lease = await other.allocate(pb.AllocateRequest(gpus=1, holder="other"))
        assert await other.release(lease.id) is True
        await other.close()

    with caplog.at_level(logging.WARNING, "radium.pool.leases.session"):
        on_grpc(test)
    # Only the session's own lines: grpc may log the servicer cancelled by server.stop(0).
    said = [r for r in caplog.records if r.name == "radium.pool.leases.session"]
    assert [r.getMessage().split(": ", 1)[1] for r in said] == [
        f"lease stream: {WINDOW + 1} calls unanswered, over the limit of {WINDOW} a stream may "
        "have in flight; a client waits for replies before it sends more "
        "(docs/lease-stream.md); ended it"
    ]


def test_a_batch_counts_each_of_its_calls() -> None:
    session = LeaseSession(one_gpu_taken()[0], lambda _: None, window=WINDOW)
    batch = waiting(1)
    batch.more.extend(waiting(n) for n in range(2, WINDOW + 2))
    with pytest.raises(CapacityError, match=f"{WINDOW + 1} calls unanswered"):
        session.serve(batch)
    assert session.unanswered == 0  # nothing of it was served


def test_our_client_waits_for_a_place_and_never_passes_the_window() -> None:
    async def test(leasing: Leasing, hog: pb.Lease, channel: grpc.aio.Channel) -> list[str]:
        client = LeaseStream(channel, (), "pool", timeout=5)
        client.window = WINDOW
        wanted = [
            pb.AllocateRequest(fraction=0.1, holder=f"c{n}", wait_seconds=30) for n in range(6)
        ]
        calls = [asyncio.ensure_future(client.allocate(request)) for request in wanted]
        while len(leasing.pool.waiters.pending()) < WINDOW:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
        assert len(leasing.pool.waiters.pending()) == WINDOW  # the others wait in the client
        # A call that finds no place within its deadline is never sent.
        with pytest.raises(DeadlineError, match=f"keep_alive not sent: {WINDOW} calls already"):
            await client._ask(pb.LeaseCall(keep_alive=pb.LeaseRef(lease_id="x")), timeout=0.2)
        leasing.release(hog.id)  # room for all six, granted as they come
        leases = await asyncio.gather(*calls)
        await client.close()
        return sorted(lease.holder for lease in leases)

    assert on_grpc(test) == [f"c{n}" for n in range(6)]


def test_a_socket_past_its_window_gets_reply_0_then_its_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        lease_connection, "LeaseSession", functools.partial(LeaseSession, window=WINDOW)
    )

    async def run() -> None:
        listener, leasing, address = await listening(gpus=1)
        try:
            leasing.allocate_now(pb.AllocateRequest(gpus=1, holder="hog"))
            reader, writer = await raw(address)
            assert (await read_frame(reader, pb.LeaseWelcome)) is not None
            batch = waiting(1)
            batch.more.extend(waiting(n) for n in range(2, WINDOW + 2))
            writer.write(wire.frame(batch))
            ending = await asyncio.wait_for(read_frame(reader, pb.LeaseReply), 10)
            assert ending is not None and ending.id == 0
            assert ending.error.code == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
            assert f"over the limit of {WINDOW}" in ending.error.message
            assert await asyncio.wait_for(read_frame(reader, pb.LeaseReply), 10) is None
            writer.close()
            # Our client, given a wider window than the pool's, fails its calls with that line.
            client = LeaseSocket(address, TOKEN, "pool", timeout=5)
            client.window = WINDOW + 1
            calls = [client.allocate(waiting(n).allocate) for n in range(WINDOW + 1)]
            failed = await asyncio.gather(*calls, return_exceptions=True)
            assert all(isinstance(e, CapacityError) for e in failed), failed
            assert {e.message for e in failed if isinstance(e, CapacityError)} == {
                ending.error.message
            }
            await client.close()
            # A client within the window is served.
            client = LeaseSocket(address, TOKEN, "pool", timeout=5)
            client.window = WINDOW
            held = next(iter(leasing.pool.state.leases))
            assert (await client.keep_alive(held)).state == "active"
            await client.close()
        finally:
            await listener.close()

    asyncio.run(run())


class Transport:
    """What a front's client asks of its asyncio transport."""

    def __init__(self) -> None:
        self.reading = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_closing(self) -> bool:
        return False


def test_a_front_reads_no_calls_of_a_client_that_reads_no_replies_whatever_the_link_does() -> None:
    async def run() -> list[bool]:
        front = lease_front.Front()
        client = front.client()
        transport = Transport()
        client._transport = transport  # type: ignore[assignment]
        front.clients[client.number] = client
        seen = []
        client.pause_writing()  # it does not read
        front.pause_writing()  # nor, for a while, does the pool
        front.resume_writing()
        seen.append(transport.reading)
        client.resume_writing()  # it reads again
        seen.append(transport.reading)
        return seen

    assert asyncio.run(run()) == [False, True]
