"""What an agent leaves behind (issue 35, items 2 and 3), with an in-memory pool: an agent cut
off from its pool exits when idle, a dead exec's runtime directory goes with its lease, stale
exec directories are swept, and ``radium down`` finds the agent through its lock file.

The same, for real (``radium exec``, a pool, ``kill -9``, ``radium down``), is in
integration/test_exec_lifecycle.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
from pathlib import Path

import pytest

from radium.agent import execdirs, lockfile
from radium.errors import UnavailableError
from radium.proto import pool_pb2 as pb
from tests.agent.test_agent import MemoryPool, Processes, acquire, make_agent


class DownPool(MemoryPool):
    """A pool that cannot be reached until ``up``."""

    def __init__(self) -> None:
        super().__init__()
        self.up = False

    async def allocate(self, request: pb.AllocateRequest) -> pb.Lease:
        if not self.up:
            raise UnavailableError("pool at 127.0.0.1:9: connection refused")
        return await super().allocate(request)


@pytest.fixture
def processes() -> Processes:
    found = Processes()
    found.started[4242] = 1000.0
    return found


def test_an_agent_is_cut_off_only_idle_holding_nothing_after_its_pool_failed(
    tmp_path: Path, processes: Processes
) -> None:
    async def scenario() -> None:
        pool = DownPool()
        agent = make_agent(tmp_path, pool, processes)
        assert not agent.cut_off(0)  # nothing failed yet: a fresh agent stays
        with pytest.raises(UnavailableError):
            await agent.acquire(acquire("c1"))
        assert agent.cut_off(0)
        assert not agent.cut_off(3600)  # not idle for that long
        pool.up = True
        await agent.acquire(acquire("c1"))
        assert not agent.cut_off(0)  # it holds a lease, and the pool answered
        pool.up = False
        with pytest.raises(UnavailableError):
            await agent.acquire(acquire("c2"))
        assert not agent.cut_off(0)  # c1's lease still held
        await agent.release("c1", "poststop")
        assert agent.cut_off(0)

    asyncio.run(scenario())


def test_a_dead_exec_s_runtime_directory_goes_with_its_lease(
    tmp_path: Path, processes: Processes
) -> None:
    async def scenario() -> None:
        pool = MemoryPool()
        agent = make_agent(tmp_path, pool, processes)
        agent.exec_dir = str(tmp_path / "containers")
        exec_dir = tmp_path / "containers" / f"exec-{socket.gethostname()}-4242-abcdef"
        container_dir = tmp_path / "containers" / "c2"
        for directory in (exec_dir, container_dir):
            directory.mkdir(parents=True)
        await agent.handle(acquire("exec-1", exec_dir))
        await agent.handle(acquire("c2", container_dir))
        assert (exec_dir / "dp.sock").is_socket()
        processes.started[4242] = 0.0  # both holders died
        await agent.watch()
        assert pool.leases == {}
        assert not exec_dir.exists()  # nobody else would remove it
        told = json.loads((container_dir / "lease.json").read_text())
        assert told["state"] == "released"  # its poststop hook removes the directory
        agent.broker.close_all()

    asyncio.run(scenario())


def test_an_exec_directory_outside_the_exec_dir_is_never_removed(
    tmp_path: Path, processes: Processes
) -> None:
    async def scenario() -> None:
        agent = make_agent(tmp_path, MemoryPool(), processes)
        agent.exec_dir = str(tmp_path / "containers")
        elsewhere = tmp_path / "home" / "exec-looks-like-one"
        elsewhere.mkdir(parents=True)
        await agent.handle(acquire("exec-1", elsewhere))
        processes.started[4242] = 0.0
        await agent.watch()
        assert elsewhere.is_dir()
        agent.broker.close_all()

    asyncio.run(scenario())


def test_the_sweep_removes_exec_directories_whose_exec_is_gone(tmp_path: Path) -> None:
    host = socket.gethostname()
    gone, alive, held = (tmp_path / f"exec-{host}-{pid}-a1b2c3" for pid in (11, 12, 13))
    other_host, container = tmp_path / "exec-otherhost-11-a1b2c3", tmp_path / "abc123"
    for directory in (gone, alive, held, other_host, container):
        directory.mkdir()
    target = tmp_path.parent / "outside"
    target.mkdir(exist_ok=True)
    (target / "keep").write_text("x")
    linked = tmp_path / f"exec-{host}-14-a1b2c3"
    linked.symlink_to(target)
    removed = execdirs.sweep(str(tmp_path), [str(held)], alive=lambda pid: pid == 12)
    assert removed == [str(gone)]
    assert not gone.exists() and alive.is_dir() and held.is_dir()
    assert other_host.is_dir() and container.is_dir()
    assert linked.is_symlink() and (target / "keep").exists()  # a link is not followed


def test_the_lock_names_its_holder_and_a_second_claim_fails(tmp_path: Path) -> None:
    path = tmp_path / "agent.lock"
    assert lockfile.holder(path) is None
    fd = lockfile.claim(path)
    assert fd is not None
    try:
        assert lockfile.holder(path) == os.getpid()
        assert lockfile.claim(path) is None
    finally:
        os.close(fd)
    assert lockfile.holder(path) is None


def test_down_signals_no_process_that_is_not_a_radium_agent(tmp_path: Path) -> None:
    """The lock names this test's process: not an agent, so it is left alone."""
    path = tmp_path / "agent.lock"
    fd = lockfile.claim(path)
    assert fd is not None
    try:
        assert lockfile.stop_holder(path, grace=1) is None  # and we are still here
    finally:
        os.close(fd)


def test_a_request_in_flight_on_either_socket_keeps_a_cut_off_agent(
    tmp_path: Path, processes: Processes
) -> None:
    async def scenario() -> None:
        agent = make_agent(tmp_path, DownPool(), processes)
        with pytest.raises(UnavailableError):
            await agent.acquire(acquire("c1"))
        entered, finish = asyncio.Event(), asyncio.Event()

        async def slow_start(reader: object, writer: object) -> None:  # a container's start
            entered.set()
            await finish.wait()

        task = asyncio.create_task(agent.track(slow_start)(None, None))  # type: ignore[arg-type]
        await entered.wait()
        assert not agent.cut_off(0)
        finish.set()
        await task
        assert agent.cut_off(0) and not agent.cut_off(3600)  # idle counts from its end

    asyncio.run(scenario())
