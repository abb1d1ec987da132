"""The node agent's service with an in-memory pool: no gRPC, no acceptor, no container.

The real agent, pool and acceptor are in integration/test_leases.py and test_pool.py; here each
rule of docs/agent-agentprotocol.md is driven on one event loop, including the races.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest

from radium import agentprotocol
from radium.agent.book import Held, LeaseBook
from radium.agent.broker import DATA_SOCKET, ConnectionBroker
from radium.agent.service import AgentService
from radium.errors import InvalidRequestError, LeaseNotFoundError, UnavailableError
from radium.proto import pool_pb2 as pb
from radium_interposer import wire

REQUEST = {"radium.io/gpus": "1"}


class MemoryPool:
    """A pool of leases in a dict; ``gate``, when set, holds allocations until it opens."""

    def __init__(self) -> None:
        self.leases: dict[str, pb.Lease] = {}
        self.allocations = 0
        self.gate: asyncio.Event | None = None
        self.state = ("active", "")
        self.numbers = itertools.count(1)

    async def allocate(self, request: pb.AllocateRequest) -> pb.Lease:
        self.allocations += 1
        if self.gate is not None:
            await self.gate.wait()
        lease = pb.Lease(
            id=f"lease-{next(self.numbers)}", holder=request.holder, acceptor="acceptor-1",
            data_address="127.0.0.1:9", device_ids=["gpu0"], ttl_seconds=30,
            credential="lease-secret", state="active",
        )  # fmt: skip
        self.leases[lease.id] = lease
        return lease

    async def keep_alive(self, lease_id: str) -> pb.KeepAliveResponse:
        if lease_id not in self.leases:
            raise LeaseNotFoundError(f"lease {lease_id} not found")
        return pb.KeepAliveResponse(state=self.state[0], message=self.state[1])

    async def release(self, lease_id: str) -> bool:
        return self.leases.pop(lease_id, None) is not None


class Processes:
    """Container init processes by pid, with their start times; a gone one starts at 0."""

    def __init__(self) -> None:
        self.started: dict[int, float] = {}

    def __call__(self, pid: int) -> float:
        return self.started.get(pid, 0.0)


def make_agent(tmp_path: Path, pool: MemoryPool, processes: Processes) -> AgentService:
    book = LeaseBook(tmp_path / "state" / "agent.json")
    return AgentService("node-1", pool, book, ConnectionBroker(book.get), processes)


@pytest.fixture
def pool() -> MemoryPool:
    return MemoryPool()


@pytest.fixture
def processes() -> Processes:
    found = Processes()
    found.started[4242] = 1000.0
    return found


def acquire(container: str, runtime_dir: Path | str = "") -> dict[str, Any]:
    return {"op": agentprotocol.ACQUIRE, "container": container, "pid": 4242, "request": REQUEST,
            "runtime_dir": str(runtime_dir)}  # fmt: skip


def test_acquire_gives_a_lease_without_its_credential_and_records_it(
    tmp_path: Path, pool: MemoryPool, processes: Processes
) -> None:
    async def scenario() -> None:
        agent = make_agent(tmp_path, pool, processes)
        runtime_dir = tmp_path / "run" / "c1"
        runtime_dir.mkdir(parents=True)
        reply = await agent.handle(acquire("c1", runtime_dir))
        lease = reply["lease"]
        assert reply["ok"] and lease["id"] == "lease-1" and lease["holder"] == "node-1/c1"
        assert "credential" not in lease
        assert json.loads((runtime_dir / "lease.json").read_text()) == lease
        assert (runtime_dir / DATA_SOCKET).is_socket()
        saved = json.loads(agent.book.state_file.read_text())["held"]
        assert [(h["container"], h["credential"]) for h in saved] == [("c1", "lease-secret")]
        assert oct(agent.book.state_file.stat().st_mode & 0o777) == "0o600"
        agent.broker.close_all()

    asyncio.run(scenario())


def test_acquire_is_idempotent_even_while_the_pool_is_still_answering(
    tmp_path: Path, pool: MemoryPool, processes: Processes
) -> None:
    async def scenario() -> None:
        agent = make_agent(tmp_path, pool, processes)
        pool.gate = asyncio.Event()
        first = asyncio.create_task(agent.handle(acquire("c1")))
        second = asyncio.create_task(agent.handle(acquire("c1")))
        await asyncio.sleep(0.01)
        pool.gate.set()
        replies = await asyncio.gather(first, second)
        again = await agent.handle(acquire("c1"))
        assert pool.allocations == 1
        assert replies[0] == replies[1] == again
        assert list(pool.leases) == ["lease-1"]

    asyncio.run(scenario())


def test_a_request_for_no_device_takes_no_lease(
    tmp_path: Path, pool: MemoryPool, processes: Processes
) -> None:
    agent = make_agent(tmp_path, pool, processes)
    message = {**acquire("c1"), "request": {"radium.io/gpus": "0", "radium.io/remote": "numpy"}}
    assert asyncio.run(agent.handle(message)) == {"ok": True, "lease": None}
    assert pool.allocations == 0 and len(agent.book) == 0


def test_release_gives_the_lease_back_once(
    tmp_path: Path, pool: MemoryPool, processes: Processes
) -> None:
    async def scenario() -> None:
        agent = make_agent(tmp_path, pool, processes)
        await agent.handle(acquire("c1"))
        release = {"op": agentprotocol.RELEASE, "container": "c1"}
        assert await agent.handle(release) == {"ok": True, "released": True}
        assert await agent.handle(release) == {"ok": True, "released": False}
        assert pool.leases == {} and len(agent.book) == 0

    asyncio.run(scenario())


def test_a_lease_the_pool_forgot_is_dropped_and_its_container_told(
    tmp_path: Path, pool: MemoryPool, processes: Processes
) -> None:
    async def scenario() -> None:
        agent = make_agent(tmp_path, pool, processes)
        runtime_dir = tmp_path / "c1"
        runtime_dir.mkdir()
        await agent.handle(acquire("c1", runtime_dir))
        held = agent.book.get("c1")
        assert held is not None
        pool.state = ("preempting", "queue research needs it")
        await agent.keep_alive(held)
        assert json.loads((runtime_dir / "lease.json").read_text())["state"] == "preempting"
        pool.leases.clear()  # it expired in the pool
        await agent.keep_alive(held)
        told = json.loads((runtime_dir / "lease.json").read_text())
        assert (told["state"], told["message"]) == ("ended", "lease lease-1 not found")
        assert agent.book.get("c1") is None and "c1" not in agent.broker.servers

    asyncio.run(scenario())


def test_a_container_whose_process_is_gone_has_its_lease_released(
    tmp_path: Path, pool: MemoryPool, processes: Processes
) -> None:
    async def scenario() -> None:
        agent = make_agent(tmp_path, pool, processes)
        await agent.handle(acquire("c1"))
        await agent.watch()
        assert agent.book.get("c1") is not None  # still running
        processes.started[4242] = 2000.0  # the pid now belongs to another process
        await agent.watch()
        assert agent.book.get("c1") is None and pool.leases == {}

    asyncio.run(scenario())


def test_a_restarted_agent_resumes_its_leases_from_the_state_file(
    tmp_path: Path, pool: MemoryPool, processes: Processes
) -> None:
    asyncio.run(make_agent(tmp_path, pool, processes).handle(acquire("c1")))
    book = LeaseBook(tmp_path / "state" / "agent.json")
    book.load()
    held = book.get("c1")
    assert isinstance(held, Held) and (held.lease_id, held.credential) == (
        "lease-1",
        "lease-secret",
    )
    (tmp_path / "state" / "agent.json").write_text("{not json")
    book.load()
    assert len(book) == 0  # unreadable: starts empty, with one error line in its log


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (b"not json\n", "a request is one JSON object per line"),
        (b"[1, 2]\n", "a request is one JSON object per line"),
        (b'{"op": "format-disk"}\n', "unknown agent operation 'format-disk'"),
        (b'{"op": "acquire", "request": {}}\n', "acquire needs a container id and its request"),
    ],
)
def test_garbage_on_the_control_socket_gets_one_line_and_the_agent_keeps_serving(
    tmp_path: Path, pool: MemoryPool, processes: Processes, line: bytes, error: str
) -> None:
    async def scenario() -> None:
        agent = make_agent(tmp_path, pool, processes)
        path = str(tmp_path / "agent.sock")
        server = await asyncio.start_unix_server(agent.serve_client, path=path)
        try:
            reader, writer = await asyncio.open_unix_connection(path)
            writer.write(line)
            reply = json.loads(await reader.readline())
            writer.close()
            assert reply == {"ok": False, "error": error, "hint": "",
                             "kind": InvalidRequestError.kind,
                             "class": "InvalidRequestError"}  # fmt: skip
            reader, writer = await asyncio.open_unix_connection(path)
            writer.write(agentprotocol.encode({"op": agentprotocol.PING}))
            assert json.loads(await reader.readline()) == {"ok": True}
            writer.close()
        finally:
            server.close()

    asyncio.run(scenario())


def test_the_data_plane_socket_hands_over_a_dialled_connection_or_says_why_not(
    tmp_path: Path, pool: MemoryPool, processes: Processes
) -> None:
    """``connect`` on dp.sock: the broker dials with the lease's credential and passes the
    socket in; a dial that fails is one line, with no socket."""
    dialled: list[tuple[str, str, str]] = []
    ours, theirs = socket.socketpair()

    def dialer(address: str, lease_id: str, credential: str) -> tuple[socket.socket, int]:
        dialled.append((address, lease_id, credential))
        if len(dialled) > 1:
            raise UnavailableError(f"acceptor data plane at {address!r} is unreachable")
        return socket.socket(fileno=os.dup(ours.fileno())), wire.VERSION

    async def scenario() -> None:
        book = LeaseBook(tmp_path / "state.json")
        agent = AgentService("node-1", pool, book, ConnectionBroker(book.get, dialer), processes)
        runtime_dir = tmp_path / "c1"
        runtime_dir.mkdir()
        await agent.handle(acquire("c1", runtime_dir))
        path = str(runtime_dir / DATA_SOCKET)

        def connect() -> tuple[bytes, int | None]:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
                client.connect(path)
                client.sendall(agentprotocol.encode({"op": agentprotocol.CONNECT}))
                return wire.recv_fd(client)

        payload, fd = await asyncio.to_thread(connect)
        # ``v``: the version the dialled handshake agreed, which the interposer checks.
        assert json.loads(payload) == {"ok": True, "v": wire.VERSION} and fd is not None
        with socket.socket(fileno=fd) as handed:
            handed.sendall(b"ping")
            assert theirs.recv(4) == b"ping"  # the very connection the broker dialled
        payload, fd = await asyncio.to_thread(connect)
        assert fd is None
        error = "acceptor data plane at '127.0.0.1:9' is unreachable"
        assert json.loads(payload) == {"ok": False, "error": error}
        agent.broker.close_all()

    asyncio.run(scenario())
    assert dialled[0] == ("127.0.0.1:9", "lease-1", "lease-secret")
    ours.close()
    theirs.close()


def test_a_container_attaches_to_a_claims_lease_and_takes_none_of_its_own(
    tmp_path: Path, pool: MemoryPool, processes: Processes
) -> None:
    async def scenario() -> None:
        agent = make_agent(tmp_path, pool, processes)
        claim = {"op": agentprotocol.ACQUIRE, "container": agentprotocol.claim_key("u1"),
                 "pid": 0, "request": REQUEST, "runtime_dir": ""}  # fmt: skip
        claimed = (await agent.handle(claim))["lease"]
        runtime_dir = tmp_path / "run" / "c1"
        runtime_dir.mkdir(parents=True)
        message = {**acquire("c1", runtime_dir), "request": {"radium.io/claim": "u1"}}
        reply = await agent.handle(message)
        assert reply["lease"] == claimed and pool.allocations == 1
        assert (runtime_dir / DATA_SOCKET).is_socket()
        assert json.loads((runtime_dir / "lease.json").read_text())["id"] == claimed["id"]
        assert await agent.handle(message) == reply  # idempotent
        release = {"op": agentprotocol.RELEASE, "container": "c1"}
        assert (await agent.handle(release))["released"] is True
        assert list(pool.leases) == [claimed["id"]]  # detached: the claim's lease stays
        await agent.handle(message)  # attached again; then the claim goes
        claim_release = {"op": agentprotocol.RELEASE, "container": claim["container"]}
        assert (await agent.handle(claim_release))["released"] is True
        assert pool.leases == {} and len(agent.book) == 0
        assert json.loads((runtime_dir / "lease.json").read_text())["state"] == "released"
        assert agent.broker.servers == {}  # its data-plane socket closed with it

    asyncio.run(scenario())


def test_a_claim_not_prepared_here_is_refused_naming_it(
    tmp_path: Path, pool: MemoryPool, processes: Processes
) -> None:
    agent = make_agent(tmp_path, pool, processes)
    message = {**acquire("c1"), "request": {"radium.io/claim": "u9"}}
    with pytest.raises(InvalidRequestError, match="claim u9 is not prepared on this node"):
        asyncio.run(agent.handle(message))
    assert pool.allocations == 0 and len(agent.book) == 0
