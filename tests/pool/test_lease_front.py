"""The lease-socket front (docs/lease-front.md): the real front process, with this test as its
pool speaking the link by hand; then a real pool's listener when its front dies, and when the
pool itself is killed."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from typing import AsyncIterator, Awaitable, Callable, TypeVar

import pytest

from radium.errors import UnavailableError
from radium.leaseclient import wire
from radium.leaseclient.socket import LeaseSocket
from radium.pool.leases import link
from radium.pool.leases.connection import give_back_unsent
from radium.proto import pool_pb2 as pb
from tests.pool.test_lease_socket import TOKEN, listening, read_frame

T = TypeVar("T")
HELLO = wire.MAGIC + wire.frame(pb.LeaseHello(version=1, token=TOKEN))


class FakePool:
    """The pool's end of a real front's link, read and written by the test."""

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        address: str,
    ) -> None:
        self.process, self.reader, self.writer, self.address = process, reader, writer, address

    async def next(self) -> link.Message:
        header = await asyncio.wait_for(self.reader.readexactly(9), 10)
        length, kind, number = int.from_bytes(header[:4], "big"), header[4], header[5:]
        payload = await self.reader.readexactly(length - 5)
        return link.Message(kind, int.from_bytes(number, "big"), payload)

    def send(self, kind: int, number: int, payload: bytes = b"") -> None:
        self.writer.write(link.message(kind, number, payload))

    async def exited(self) -> int:
        for _ in range(500):
            if (status := self.process.poll()) is not None:
                return status
            await asyncio.sleep(0.01)
        raise AssertionError("the front did not exit")


@contextlib.asynccontextmanager
async def front() -> AsyncIterator[FakePool]:
    listening_socket = socket.create_server(("127.0.0.1", 0))
    ours, theirs = socket.socketpair()
    fds = (listening_socket.fileno(), theirs.fileno())
    process = subprocess.Popen(
        [
            sys.executable,
            "-I",  # as the pool starts it
            "-m",
            "radium.pool.leases.front",
            "--listen-fd",
            str(fds[0]),
            "--link-fd",
            str(fds[1]),
        ],
        pass_fds=fds,
    )
    theirs.close()
    address = f"127.0.0.1:{listening_socket.getsockname()[1]}"
    listening_socket.close()
    reader, writer = await asyncio.open_unix_connection(sock=ours)
    pool = FakePool(process, reader, writer, address)
    try:
        assert await pool.next() == (link.READY, 0, b"")
        yield pool
    finally:
        process.kill()
        process.wait()
        writer.close()


def with_front(test: Callable[[FakePool], Awaitable[T]]) -> T:
    async def run() -> T:
        async with front() as pool:
            return await test(pool)

    return asyncio.run(run())


async def client(address: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, _, port = address.rpartition(":")
    return await asyncio.open_connection(host, int(port))


def test_the_front_relays_a_connection_both_ways_and_holds_its_calls_until_the_welcome() -> None:
    async def test(pool: FakePool) -> None:
        reader, writer = await client(pool.address)
        call = pb.LeaseCall(id=7, release=pb.LeaseRef(lease_id="l-1"))
        writer.write(HELLO + wire.frame(call))  # a call before its welcome
        kind, number, payload = await pool.next()
        peer, certificate, hello = link.parse_hello(payload)
        assert (kind, certificate) == (link.HELLO, b"")
        assert "127.0.0.1" in peer and pb.LeaseHello.FromString(hello).token == TOKEN
        with pytest.raises(asyncio.TimeoutError):  # held, not relayed
            await asyncio.wait_for(pool.next(), 0.3)
        pool.send(link.WELCOME, number, wire.frame(pb.LeaseWelcome(version=1)))
        assert (await read_frame(reader, pb.LeaseWelcome)) == pb.LeaseWelcome(version=1)
        assert await pool.next() == (link.CALL, number, call.SerializeToString())
        reply = pb.LeaseReply(id=7, released=pb.ReleaseResponse(released=True))
        pool.send(link.SEND, number, wire.frame(reply))
        assert await read_frame(reader, pb.LeaseReply) == reply
        writer.close()
        assert await pool.next() == (link.GONE, number, b"")
        # Replies for a connection that has gone come back, so their leases can be given back.
        pool.send(link.SEND, number, wire.frame(reply))
        assert await pool.next() == (link.UNSENT, number, wire.frame(reply))

    with_front(test)


def test_the_front_writes_a_refusal_and_closes_and_closes_what_the_pool_closes() -> None:
    async def test(pool: FakePool) -> None:
        refused_reader, refused = await client(pool.address)
        refused.write(HELLO)
        _, first, _ = await pool.next()
        closed_reader, closed = await client(pool.address)
        closed.write(HELLO)
        _, second, _ = await pool.next()
        refusal = pb.LeaseWelcome(error=pb.CallError(code=16, message="no"))
        pool.send(link.REFUSE, first, wire.frame(refusal))
        pool.send(link.CLOSE, second)
        assert await read_frame(refused_reader, pb.LeaseWelcome) == refusal
        assert await refused_reader.read() == b""
        assert await closed_reader.read() == b""
        assert {(await pool.next()).connection, (await pool.next()).connection} == {first, second}

    with_front(test)


@pytest.mark.parametrize("broken", [b"\x00\x00\x00\x05\x63\x00\x00\x00\x01", b"\xff" * 9])
def test_a_broken_link_or_the_pool_s_end_makes_the_front_exit(broken: bytes) -> None:
    async def test(pool: FakePool) -> list[int]:
        reader, writer = await client(pool.address)
        writer.write(HELLO)
        await pool.next()
        pool.writer.write(broken)  # an unknown kind; a length over the limit
        status = await pool.exited()
        assert await reader.read() == b""  # its connections end with it
        return [status]

    assert with_front(test) == [0]

    async def ended(pool: FakePool) -> int:
        pool.writer.close()
        return await pool.exited()

    assert with_front(ended) == 0


def test_a_terminal_s_ctrl_c_leaves_the_front_to_its_pool() -> None:
    async def test(pool: FakePool) -> int:
        os.kill(pool.process.pid, signal.SIGINT)  # the whole foreground group gets it
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(pool.exited(), 0.5)
        pool.writer.close()  # the pool ends it when it has ended its sessions
        return await pool.exited()

    assert with_front(test) == 0


def test_the_front_never_takes_the_pool_s_cpu_on_waking() -> None:
    """Linux's batch policy (docs/lease-front.md, "Scheduling"), for the front and its
    threads; the pool, the process that starts it, keeps the normal one."""

    async def test(pool: FakePool) -> list[int]:
        tasks = os.listdir(f"/proc/{pool.process.pid}/task")
        return [os.sched_getscheduler(int(task)) for task in tasks]

    assert set(with_front(test)) == {os.SCHED_BATCH}
    assert os.sched_getscheduler(0) == os.SCHED_OTHER


def test_a_dead_front_ends_its_sessions_and_is_replaced(caplog: pytest.LogCaptureFixture) -> None:
    async def run() -> list[str]:
        listener, leasing, address = await listening(gpus=1)
        try:
            holder = LeaseSocket(address, TOKEN, "pool", timeout=5)
            taken = await holder.allocate(pb.AllocateRequest(gpus=1, holder="holds"))
            waiter = LeaseSocket(address, TOKEN, "pool", timeout=5)
            waiting = asyncio.ensure_future(
                waiter.allocate(pb.AllocateRequest(gpus=1, holder="waits", wait_seconds=30))
            )
            await until(leasing.pool.waiters.pending)
            old = listener.front_pid
            os.kill(old, signal.SIGKILL)
            with pytest.raises(UnavailableError):
                await waiting  # its connection ended with the front
            # Withdrawn once the pool reads the end, and a new front starts.
            await until(lambda: not leasing.pool.waiters.pending())
            await until(lambda: listener.front_pid not in (None, old))
            assert await holder.release(taken.id) is True  # connects again, to the new front
            again = await waiter.allocate(pb.AllocateRequest(gpus=1, holder="again"))
            await holder.close()
            await waiter.close()
            return [lease.holder for lease in leasing.pool.state.leases.values()] + [again.holder]
        finally:
            await listener.close()

    with caplog.at_level(logging.ERROR, "radium.pool.leases.listener"):
        assert asyncio.run(run()) == ["again", "again"]
    assert any("lease-socket front exited" in r.getMessage() for r in caplog.records)


async def until(condition: Callable[[], object]) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "not within 10 s"
        await asyncio.sleep(0.01)


def test_replies_that_could_not_be_sent_give_their_leases_back() -> None:
    async def run() -> list[str]:
        listener, leasing, _ = await listening(gpus=2)
        await listener.close()
        granted = leasing.allocate_now(pb.AllocateRequest(gpus=1, holder="gone"))
        kept = leasing.allocate_now(pb.AllocateRequest(gpus=1, holder="kept"))
        assert granted is not None and kept is not None
        replies = [
            pb.LeaseReply(id=1, lease=granted),
            pb.LeaseReply(id=2, released=pb.ReleaseResponse(released=True)),
        ]
        give_back_unsent(leasing, wire.batches(replies, 64))
        return [lease.holder for lease in leasing.pool.state.leases.values()]

    assert asyncio.run(run()) == ["kept"]


POOL = """
import asyncio, sys
from tests.pool.test_lease_socket import listening
async def main():
    listener, _, _ = await listening()
    print(listener.front_pid, flush=True)
    await asyncio.sleep(3600)
asyncio.run(main())
"""


def test_a_killed_pool_leaves_no_front_behind() -> None:
    pool = subprocess.Popen([sys.executable, "-c", POOL], stdout=subprocess.PIPE, text=True)
    try:
        assert pool.stdout is not None
        front_pid = int(pool.stdout.readline())
        os.kill(front_pid, 0)  # it runs
        pool.kill()
        pool.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _alive(front_pid):
            time.sleep(0.05)
        assert not _alive(front_pid)
    finally:
        pool.kill()
        pool.wait()


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, reaped by init in time, counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
