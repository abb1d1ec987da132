"""The lease socket (docs/lease-socket.md): a real listener on loopback in front of a real
PoolState, and the real client; raw connections for what a client of ours never sends."""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
from pathlib import Path
from typing import AsyncIterator, Awaitable, Callable, TypeVar

import grpc
import pytest

from radium import certs
from radium.configtree import TlsConfig
from radium.errors import AuthError, LeaseWireError, PermissionDeniedError, UnavailableError
from radium.leaseclient import wire
from radium.leaseclient.socket import LeaseSocket
from radium.pool.core.dispatcher import Dispatcher
from radium.pool.leases.leasing import Leasing
from radium.pool.leases.listener import (
    LeaseListener,
    role_authorize,
    token_authorize,
)
from radium.proto import pool_pb2 as pb
from tests.pool.test_commits import HeldCommits
from tests.pool.test_queues import pool
from tests.ports import free_port

TOKEN = "t0k3n"
T = TypeVar("T")


async def listening(gpus: int = 4) -> tuple[LeaseListener, Leasing, str]:
    leasing = Leasing(Dispatcher(pool(gpus=gpus), clock=lambda: 1.0))
    listener = LeaseListener(leasing, token_authorize([TOKEN]))
    await listener.start("127.0.0.1:0")
    return listener, leasing, f"127.0.0.1:{listener.port}"


def served(test: Callable[[LeaseListener, Leasing, str], Awaitable[T]], gpus: int = 4) -> T:
    async def run() -> T:
        listener, leasing, address = await listening(gpus)
        try:
            return await test(listener, leasing, address)
        finally:
            await listener.close()

    return asyncio.run(run())


async def raw(
    address: str, hello: pb.LeaseHello | None = None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection that said hello (with our token unless ``hello`` is given) and was welcomed."""
    host, _, port = address.rpartition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(wire.MAGIC + wire.frame(hello or pb.LeaseHello(version=1, token=TOKEN)))
    return reader, writer


M = TypeVar("M", pb.LeaseCall, pb.LeaseHello, pb.LeaseReply, pb.LeaseWelcome)
Batch = TypeVar("Batch", pb.LeaseCall, pb.LeaseReply)


async def read_frame(reader: asyncio.StreamReader, kind: type[M]) -> M | None:
    """The next frame's message, as the other end sent it; None when it closed (between
    frames)."""
    try:
        (length,) = struct.unpack(">I", await reader.readexactly(4))
        return kind.FromString(await reader.readexactly(length))
    except asyncio.IncompleteReadError as exc:
        assert not exc.partial, "the other end closed the connection inside a frame"
        return None


async def messages(reader: asyncio.StreamReader, kind: type[Batch]) -> AsyncIterator[Batch]:
    """Every call or reply the other end sends, those of a batch each in turn, to its end."""
    while (message := await read_frame(reader, kind)) is not None:
        for one in (message, *message.more):
            yield one


def test_allocate_keep_alive_and_release_on_the_socket() -> None:
    async def test(_: LeaseListener, leasing: Leasing, address: str) -> None:
        client = LeaseSocket(address, TOKEN, "pool", timeout=5)
        lease = await client.allocate(pb.AllocateRequest(gpus=1, holder="h"))
        assert list(leasing.pool.state.leases) == [lease.id]
        assert (await client.keep_alive(lease.id)).expires_at > 0
        assert await client.release(lease.id) is True
        assert await client.release(lease.id) is False  # ended already
        assert not leasing.pool.state.leases
        await client.close()

    served(test)


def test_many_calls_at_once_are_batched_and_all_answered() -> None:
    async def test(_: LeaseListener, leasing: Leasing, address: str) -> int:
        client = LeaseSocket(address, TOKEN, "pool", timeout=5)
        await client.connect()
        wanted = pb.AllocateRequest(fraction=0.01, holder="many")
        leases = await asyncio.gather(*(client.allocate(wanted) for _ in range(60)))
        assert len({lease.id for lease in leases}) == 60 == len(leasing.pool.state.leases)
        assert all(await asyncio.gather(*(client.release(lease.id) for lease in leases)))
        await client.close()
        return len(leasing.pool.state.leases)

    assert served(test) == 0


def test_the_answers_of_a_commit_go_out_as_one_frame_in_the_turn_that_committed() -> None:
    async def run() -> list[int]:
        commits = HeldCommits()
        leasing = Leasing(Dispatcher(pool(gpus=4), clock=lambda: 1.0, commits=commits))
        listener = LeaseListener(leasing, token_authorize([TOKEN]))
        await listener.start("127.0.0.1:0")
        client = socket.create_connection(("127.0.0.1", listener.port))
        try:
            first, *more = [
                pb.LeaseCall(id=n, allocate=pb.AllocateRequest(gpus=1, holder=f"h{n}"))
                for n in range(1, 4)
            ]
            first.more.extend(more)
            hello = pb.LeaseHello(version=1, token=TOKEN)
            client.sendall(wire.MAGIC + wire.frame(hello) + wire.frame(first))
            while len(commits.waiting) < 3:  # served; the answers wait for the commit
                await asyncio.sleep(0.01)
            client.settimeout(5)
            assert pb.LeaseWelcome.FromString(receive_frame(client)).version == 1
            commits.commit()  # and no turn of the loop after it: the write is already made
            client.settimeout(0.5)
            replies = pb.LeaseReply.FromString(receive_frame(client))
            return [reply.id for reply in (replies, *replies.more) if reply.lease.id]
        finally:
            client.close()
            await listener.close()

    assert asyncio.run(run()) == [1, 2, 3]


def receive_frame(client: socket.socket) -> bytes:
    """One frame's body from a blocking socket (the loop is not run meanwhile)."""

    def exactly(size: int) -> bytes:
        data = b""
        while len(data) < size:
            data += client.recv(size - len(data))
        return data

    return exactly(struct.unpack(">I", exactly(4))[0])


def test_a_call_error_ends_that_call_only() -> None:
    async def test(_: LeaseListener, leasing: Leasing, address: str) -> None:
        client = LeaseSocket(address, TOKEN, "pool", timeout=5)
        with pytest.raises(Exception, match="holder and queue names"):
            await client.allocate(pb.AllocateRequest(gpus=1, holder="x" * 300))
        lease = await client.allocate(pb.AllocateRequest(gpus=1, holder="after"))
        assert lease.holder == "after"
        await client.close()

    served(test)


@pytest.mark.parametrize("token", ["wrong", ""])
def test_a_wrong_or_missing_token_is_refused_with_one_line(token: str) -> None:
    async def test(_: LeaseListener, leasing: Leasing, address: str) -> str:
        client = LeaseSocket(address, token, "pool", timeout=5)
        with pytest.raises(AuthError) as refused:
            await client.allocate(pb.AllocateRequest(gpus=1))
        await client.close()
        assert not leasing.pool.state.leases
        return refused.value.one_line()

    line = served(test)
    assert f"token not accepted ({'wrong' if token else 'no'} token)" in line
    assert "\n" not in line


def test_another_version_is_refused_by_name() -> None:
    async def test(_: LeaseListener, leasing: Leasing, address: str) -> pb.LeaseWelcome | None:
        reader, writer = await raw(address, pb.LeaseHello(version=2, token=TOKEN))
        welcome = await read_frame(reader, pb.LeaseWelcome)
        assert await reader.read() == b""  # and closed
        writer.close()
        return welcome

    welcome = served(test)
    assert welcome is not None
    assert welcome.error.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert "version 2 is not spoken here" in welcome.error.message


@pytest.mark.parametrize(
    "garbage",
    [
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",  # a gRPC client on the wrong port
        wire.MAGIC + struct.pack(">I", 1 << 30),  # a hello of 1 GiB
        wire.MAGIC + struct.pack(">I", 5) + b"\xff\xff\xff\xff\xff",  # no LeaseHello
        wire.MAGIC + struct.pack(">I", 9) + b"abc",  # ends inside its hello
    ],
)
def test_garbage_before_the_hello_is_closed_unanswered_and_the_pool_serves_on(
    garbage: bytes, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    async def test(_: LeaseListener, leasing: Leasing, address: str) -> bytes:
        host, _, port = address.rpartition(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(garbage)
        writer.write_eof()
        answer = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        client = LeaseSocket(address, TOKEN, "pool", timeout=5)
        assert (await client.allocate(pb.AllocateRequest(gpus=1))).id  # still serving
        await client.close()
        return answer

    with caplog.at_level(logging.WARNING, "radium.pool.leases.connection"):
        assert served(test) == b""
    # One line: the front's, on the pool's stderr, for bad framing; the pool's for a hello that
    # is not one (docs/lease-front.md).
    lines = [r.getMessage() for r in caplog.records] + capfd.readouterr().err.splitlines()
    assert len([line for line in lines if "closed it" in line]) == 1, lines


@pytest.mark.parametrize(
    "garbage",
    [
        struct.pack(">I", (1 << 20) + 1),  # a frame over the limit
        struct.pack(">I", 3) + b"\xff\xff\xff",  # not a LeaseCall
    ],
)
def test_a_broken_frame_after_the_welcome_closes_that_connection_only(garbage: bytes) -> None:
    async def test(_: LeaseListener, leasing: Leasing, address: str) -> list[str]:
        reader, writer = await raw(address)
        assert (await read_frame(reader, pb.LeaseWelcome)) is not None
        # An allocation, then the garbage in the same write: the pool serves the call, finds
        # the garbage in the same read and closes before the answer could go out, so the
        # lease it granted is given back (a client gone mid-flight), never left half-served.
        call = wire.frame(pb.LeaseCall(id=1, allocate=pb.AllocateRequest(gpus=1)))
        writer.write(call + garbage)
        got = [reply async for reply in messages(reader, pb.LeaseReply)]  # the pool closed it
        writer.close()
        for reply in got:  # had the answer gone out first, the client would hold the lease
            assert reply.lease.id
            leasing.release(reply.lease.id)
        client = LeaseSocket(address, TOKEN, "pool", timeout=5)  # the pool serves on
        assert (await client.allocate(pb.AllocateRequest(gpus=1, holder="next"))).id
        await client.close()
        return [lease.holder for lease in leasing.pool.state.leases.values()]

    assert served(test) == ["next"]


def test_a_client_gone_with_a_waiting_allocation_is_never_granted_it() -> None:
    async def test(_: LeaseListener, leasing: Leasing, address: str) -> list[str]:
        hog = LeaseSocket(address, TOKEN, "pool", timeout=5)
        taken = await hog.allocate(pb.AllocateRequest(gpus=1, holder="hog"))
        reader, writer = await raw(address)
        assert (await read_frame(reader, pb.LeaseWelcome)) is not None
        wanted = pb.AllocateRequest(gpus=1, holder="gone", wait_seconds=30)
        writer.write(wire.frame(pb.LeaseCall(id=1, allocate=wanted)))
        while not leasing.pool.waiters.pending():
            await asyncio.sleep(0.01)
        writer.close()  # gone while it waits
        while leasing.pool.waiters.pending():
            await asyncio.sleep(0.01)
        await hog.release(taken.id)
        await hog.close()
        return [lease.holder for lease in leasing.pool.state.leases.values()]

    assert served(test, gpus=1) == []


def test_the_client_moves_past_a_dead_address_and_fails_over_when_its_pool_stops() -> None:
    async def run() -> None:
        first, _, at_first = await listening()
        second, leasing, at_second = await listening()
        dead = f"127.0.0.1:{free_port()}"
        client = LeaseSocket(f"{dead},{at_first},{at_second}", TOKEN, "pool", timeout=5)
        await client.allocate(pb.AllocateRequest(fraction=0.1))
        waiting = asyncio.ensure_future(
            client.allocate(pb.AllocateRequest(gpus=4, holder="w", wait_seconds=30))
        )
        await asyncio.sleep(0.2)
        await first.close()  # the leader stops: what was in flight fails
        with pytest.raises(UnavailableError):
            await waiting
        lease = await client.allocate(pb.AllocateRequest(gpus=1, holder="next"))
        assert list(leasing.pool.state.leases) == [lease.id]  # from the second
        await client.close()
        await second.close()

    asyncio.run(run())


async def scripted_pool(
    serve: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
) -> tuple[asyncio.Server, str]:
    """A pool of our own making on loopback: it welcomes each client, then ``serve`` runs."""

    async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readexactly(len(wire.MAGIC))
        assert await read_frame(reader, pb.LeaseHello) is not None
        writer.write(wire.frame(pb.LeaseWelcome(version=wire.VERSION)))
        await serve(reader, writer)

    server = await asyncio.start_server(connected, "127.0.0.1", 0)
    return server, f"127.0.0.1:{server.sockets[0].getsockname()[1]}"


def test_calls_made_while_the_pool_reads_nothing_are_all_answered_once_it_reads() -> None:
    many, big = 3000, "l" * 4000  # 12 MB of calls: more than the socket buffers hold
    reading = asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reading.wait()
        async for call in messages(reader, pb.LeaseCall):
            writer.write(wire.frame(pb.LeaseReply(id=call.id, released={"released": True})))

    async def run() -> list[bool]:
        server, address = await scripted_pool(serve)
        client = LeaseSocket(address, TOKEN, "pool", timeout=30)
        released = [asyncio.ensure_future(client.release(big)) for _ in range(many)]
        await asyncio.sleep(0.5)
        released += [asyncio.ensure_future(client.release(big)) for _ in range(many)]
        await asyncio.sleep(0.1)
        reading.set()
        answers = await asyncio.gather(*released)
        await client.close()
        server.close()
        return answers

    assert asyncio.run(run()) == [True] * 2 * many


def test_a_broken_frame_from_the_pool_fails_the_calls_and_the_next_call_connects_again() -> None:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async for call in messages(reader, pb.LeaseCall):
            if call.release.lease_id == "garbage":
                writer.write(struct.pack(">I", 2 << 20))  # over the frame limit
            else:
                writer.write(wire.frame(pb.LeaseReply(id=call.id, released={"released": True})))

    async def run() -> None:
        server, address = await scripted_pool(serve)
        client = LeaseSocket(address, TOKEN, "pool", timeout=5)
        with pytest.raises(LeaseWireError, match="over the limit"):
            await client.release("garbage")
        assert await client.release("next") is True  # on a new connection
        await client.close()
        server.close()

    asyncio.run(run())


def test_no_address_listening_is_one_unavailable_line() -> None:
    async def run() -> str:
        client = LeaseSocket(f"127.0.0.1:{free_port()}", TOKEN, "pool at x", timeout=2)
        with pytest.raises(UnavailableError) as down:
            await client.release("nothing")
        await client.close()
        return down.value.one_line()

    line = asyncio.run(run())
    assert "no lease socket accepts" in line and "refused" in line.lower()


def _tls(directory: Path, name: str) -> TlsConfig:
    return TlsConfig(
        str(directory / certs.CA_CERT),
        str(directory / f"{name}.pem"),
        str(directory / f"{name}.key"),
    )


def test_mutual_tls_admits_an_agent_and_refuses_other_roles_and_cas(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    for directory in (ours, theirs):
        certs.init(directory)
        certs.issue(directory, "pool", "pool", ["127.0.0.1"])
        certs.issue(directory, "agent", "agent", [])
    certs.issue(ours, "acceptor", "acceptors", [])

    async def run() -> None:
        leasing = Leasing(Dispatcher(pool(), clock=lambda: 1.0))
        authorize = role_authorize(frozenset({"agent", "admin"}))
        listener = LeaseListener(leasing, authorize, _tls(ours, "pool"))
        await listener.start("127.0.0.1:0")
        address = f"127.0.0.1:{listener.port}"
        try:
            agent = LeaseSocket(address, "", "pool", 5, _tls(ours, "agent"))
            lease = await agent.allocate(pb.AllocateRequest(gpus=1))
            assert await agent.release(lease.id)
            await agent.close()
            acceptor = LeaseSocket(address, "", "pool", 5, _tls(ours, "acceptors"))
            with pytest.raises(PermissionDeniedError, match="an acceptor certificate"):
                await acceptor.connect()
            await acceptor.close()
            # Trusts our pool, but its certificate is another CA's.
            foreign = _tls(theirs, "agent")
            stranger = LeaseSocket(
                address,
                "",
                "pool",
                5,
                TlsConfig(str(ours / certs.CA_CERT), foreign.cert, foreign.key),
            )
            with pytest.raises(AuthError, match="refused this node's certificate"):
                await stranger.connect()
            await stranger.close()
            # A pool whose certificate is another CA's is not ours.
            impostor = LeaseListener(leasing, authorize, _tls(theirs, "pool"))
            await impostor.start("127.0.0.1:0")
            fooled = LeaseSocket(f"127.0.0.1:{impostor.port}", "", "pool", 5, _tls(ours, "agent"))
            with pytest.raises(AuthError, match="TLS handshake failed"):
                await fooled.connect()
            await fooled.close()
            await impostor.close()
        finally:
            await listener.close()
        assert not leasing.pool.state.leases

    asyncio.run(run())
