"""The agent process: one per node (a lock file keeps a second out), its parts wired together,
its sockets and background tasks started, and all of it stopped on SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import signal
import socket
from pathlib import Path

from radium import rpc
from radium.config import Config
from radium.leasestream import LeaseStream
from radium.shim.agent.book import LeaseBook, write_lease_file
from radium.shim.agent.broker import ConnectionBroker
from radium.shim.agent.service import AgentService

log = logging.getLogger(__name__)


async def serve(config: Config) -> None:
    lock_path = Path(config.agent.state_file).with_suffix(".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    lock = open(lock_path, "w")  # noqa: SIM115 - held for the agent's life
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        log.info("another agent is running (lock %s)", lock_path)
        return
    channel = rpc.aio_channel(config.client.pool, config.client.tls)
    #: Every pool call of the agent is on this one stream (docs/lease-stream.md).
    pool = LeaseStream(
        channel,
        rpc.metadata(config.client.token),
        f"pool at {config.client.pool}",
        config.client.timeout,
        config.client.tls.enabled,
    )
    book = LeaseBook(Path(config.agent.state_file))
    book.load()
    broker = ConnectionBroker(book.get)
    node = config.agent.node or socket.gethostname()
    agent = AgentService(node, pool, book, broker)
    endpoint = None
    if config.agent.metrics:
        # Imported only then: prometheus-client takes 60 ms to import, and the hook may be
        # waiting for this agent to start (autostart) before its container can.
        from radium import metrics
        from radium.shim.agent_metrics import AgentMetrics

        registry = metrics.new_registry()
        agent.answered = AgentMetrics(registry, lambda: len(book)).request
        endpoint = metrics.serve(config.agent.metrics, registry, "agent.metrics")
    socket_path = config.agent.socket
    os.makedirs(os.path.dirname(socket_path), exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(socket_path)
    server = await asyncio.start_unix_server(agent.serve_client, path=socket_path)
    os.chmod(socket_path, 0o600)
    tasks = [
        asyncio.create_task(agent.keep_alive_forever()),
        asyncio.create_task(agent.watch_forever()),
    ]
    for held in book:
        write_lease_file(held)
        await broker.open(held)
    log.info("agent of node %s listening on %s", node, socket_path)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        for task in tasks:
            task.cancel()
        server.close()
        broker.close_all()
        await pool.close()
        await channel.close()
        if endpoint is not None:
            endpoint.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(socket_path)
        lock.close()
