"""``pool.server.lead``: what it made is undone, in reverse, when a later step fails or when it
stops (the store closed, the gRPC port and the metrics endpoint free again)."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
from pathlib import Path

import pytest

from radium.configtree import Config
from radium.errors import UnavailableError
from radium.pool.api.server import lead
from radium.pool.store.sqlite import SQLiteStore
from tests.ports import free_port


class Closing(SQLiteStore):
    """A SQLite store that says whether it was closed."""

    closed = False

    def close(self) -> None:
        self.closed = True
        super().close()


def config(listen: int, metrics: int = 0, lease: int = 0) -> Config:
    pool = dataclasses.replace(
        Config().pool,
        listen=f"127.0.0.1:{listen}",
        metrics=f"127.0.0.1:{metrics}" if metrics else "",
        lease_listen=f"127.0.0.1:{lease}" if lease else "",
    )
    return dataclasses.replace(Config(), pool=pool)


def free_again(*ports: int) -> bool:
    """Whether each port can be listened on again: nothing of the pool holds it."""
    for port in ports:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def run(cfg: Config, store: SQLiteStore, stop_at_ready: bool = True) -> None:
    async def scenario() -> None:
        stop, ready = asyncio.Event(), asyncio.Event()
        task = asyncio.create_task(lead(cfg, store, stop, ready))
        waits = {task, asyncio.ensure_future(ready.wait())}
        done, _ = await asyncio.wait(waits, timeout=30, return_when=asyncio.FIRST_COMPLETED)
        assert done, "the pool neither came up nor failed"
        if task not in done and stop_at_ready:
            stop.set()
        await task

    asyncio.run(scenario())


def taken() -> tuple[socket.socket, int]:
    holder = socket.create_server(("127.0.0.1", 0))
    return holder, holder.getsockname()[1]


def test_a_pool_that_served_undoes_everything_when_it_stops(tmp_path: Path) -> None:
    store = Closing(str(tmp_path / "pool.db"))
    ports = free_port(), free_port(), free_port()
    run(config(*ports), store)
    assert store.closed and free_again(*ports)


@pytest.mark.parametrize("which", ["listen", "metrics", "lease"])
def test_a_step_that_fails_undoes_the_steps_before_it(tmp_path: Path, which: str) -> None:
    store = Closing(str(tmp_path / "pool.db"))
    holder, busy = taken()
    ports = {"listen": free_port(), "metrics": free_port(), "lease": free_port()}
    ports[which] = busy
    try:
        with pytest.raises(UnavailableError, match=str(busy)):
            run(config(ports["listen"], ports["metrics"], ports["lease"]), store)
    finally:
        holder.close()
    # The store is closed and every port the pool took before the failure is free again.
    assert store.closed and free_again(*(p for name, p in ports.items() if name != which))
