"""The agent process: one per node (a lock file keeps a second out), its parts wired together,
its sockets and background tasks started, and all of it stopped on SIGTERM or SIGINT.

An agent autostarted by the hook or ``radium exec`` (:data:`IDLE_EXIT_ENV` set) also stops by
itself once it holds no lease, has been asked nothing for that many seconds, and the pool failed
its last lease call: a pool that is down (or a config whose pool does not resolve) must not leave
an agent behind, holding the lock that ``radium up``'s own agent needs. And a service's agent
(``radium up``'s, a unit's) that finds an autostarted one holding the lock stops it and takes
over its leases (the state file), instead of giving up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import sysconfig
from pathlib import Path
from typing import Awaitable, Callable

import grpc.aio

from radium import agentprotocol, rpc
from radium import config as config_module
from radium.agent import execdirs, lockfile, nativeclient
from radium.agent.book import LeaseBook, write_lease_file
from radium.agent.broker import ConnectionBroker
from radium.agent.mounthelper import MountHelper
from radium.agent.service import AgentService
from radium.agent.starts import ConfigSource, StartService
from radium.configtree import ClientConfig, Config
from radium.leaseclient.calls import LeaseCalls
from radium.leaseclient.socket import LeaseSocket
from radium.leaseclient.stream import LeaseStream
from radium.statedir import open_state_dir

__all__ = ["IDLE_EXIT_ENV", "LOCK_WAIT", "STOP_GRACE", "serve"]

log = logging.getLogger(__name__)
#: Set by autostart: the seconds an agent cut off from its pool, holding nothing, stays idle.
IDLE_EXIT_ENV = lockfile.AUTOSTARTED
#: How long an agent waits for the lock of an agent that is stopping.
LOCK_WAIT = 5.0
#: How long an autostarted agent has to stop when a service's agent takes over.
STOP_GRACE = 10.0


def _lease_client(client: ClientConfig, channel: grpc.aio.Channel) -> LeaseCalls:
    """Where every lease call of the agent goes: the pool's lease socket when [client] leases
    names it (docs/lease-socket.md), else one gRPC stream (docs/lease-stream.md)."""
    if client.leases:
        return LeaseSocket(
            client.leases, client.token, f"pool at {client.leases}", client.timeout, client.tls
        )
    return LeaseStream(
        channel,
        rpc.metadata(client.token),
        f"pool at {client.pool}",
        client.timeout,
        client.tls.enabled,
    )


async def serve(config: Config) -> None:
    """``radium agent``: one per node, until SIGTERM or SIGINT."""
    lock_path = Path(config.agent.state_file).with_suffix(".lock")
    # Lease credentials are kept there: refused if another local user could read or replace
    # it (or what is in it), made 0700 otherwise (docs/security.md).
    open_state_dir(lock_path.parent, create=True, setting="[agent] state_file").close()
    idle_exit = _idle_exit_seconds()
    lock = await _claim(lock_path, LOCK_WAIT if idle_exit is not None else 0.0)
    if lock is None and idle_exit is None:
        # A service's agent (radium up's, a unit's) takes over from one that radium exec or
        # the hook autostarted: it resumes that agent's leases from the state file.
        stopped = lockfile.stop_holder(lock_path, STOP_GRACE, marked=IDLE_EXIT_ENV)
        if stopped is not None:
            log.info("took over from the autostarted agent (pid %d)", stopped)
            lock = await _claim(lock_path, LOCK_WAIT)
    if lock is None:
        log.info("another agent is running (lock %s)", lock_path)
        return
    try:
        await _serve(config, idle_exit)
    finally:
        os.close(lock)


async def _claim(lock_path: Path, wait: float) -> int | None:
    """The agent's lock; autostarted, it waits a little for one that is stopping (idle)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    while (lock := lockfile.claim(lock_path)) is None and loop.time() < deadline:
        await asyncio.sleep(0.05)
    return lock


def _idle_exit_seconds() -> float | None:
    try:
        return float(os.environ[IDLE_EXIT_ENV])
    except (KeyError, ValueError):
        return None


async def _stop_when_cut_off(agent: AgentService, grace: float, stop: asyncio.Event) -> None:
    while not agent.cut_off(grace):
        await asyncio.sleep(min(grace, 1.0))
    log.warning(
        "autostarted agent exits: it holds no lease, was asked nothing for %gs, and its pool "
        "failed its last call", grace
    )  # fmt: skip
    stop.set()


async def _serve(config: Config, idle_exit: float | None) -> None:
    """Serve until SIGTERM or SIGINT (autostarted: until idle and cut off). Each resource is
    registered for its undoing as it is made, as containerd's shim manager does: a failure on
    the way up undoes what was made, in reverse (no mount helper, socket or link is left), and
    so does the end (the sockets close before the mount helper stops)."""
    async with contextlib.AsyncExitStack() as stack:
        channel = rpc.aio_channel(config.client.pool, config.client.tls)
        stack.push_async_callback(channel.close)
        pool = _lease_client(config.client, channel)
        stack.push_async_callback(pool.close)
        book = LeaseBook(Path(config.agent.state_file))
        book.load()
        execdirs.sweep(config.hook.state_dir, [held.runtime_dir for held in book])
        broker = ConnectionBroker(book.get)
        stack.callback(broker.close_all)
        node = config.agent.node or socket.gethostname()
        agent = AgentService(node, pool, book, broker, exec_dir=config.hook.state_dir)
        if config.agent.metrics:
            stack.callback(_serve_metrics(config, agent, book))
        mounter = MountHelper(os.environ)
        stack.push_async_callback(mounter.close)
        await mounter.start()
        socket_path = config.agent.socket
        os.makedirs(os.path.dirname(socket_path), exist_ok=True)
        stack.callback(_remove, socket_path)
        stack.callback((await _listen(socket_path, agent.track(agent.serve_client))).close)
        source = ConfigSource(config_module.config_path()[0])
        start_path = agentprotocol.start_socket(socket_path)
        starts = StartService(config, source, agent, mounter, _agent_hook(start_path), os.environ)
        stack.callback(_remove, start_path)
        stack.callback((await _listen(start_path, agent.track(starts.serve_client))).close)
        stack.callback(_unpublish, _publish(source.path, start_path), start_path)
        stop = asyncio.Event()
        forever = [agent.keep_alive_forever(), agent.watch_forever()]
        if idle_exit is not None:
            forever.append(_stop_when_cut_off(agent, idle_exit, stop))
        for work in forever:
            stack.callback(asyncio.create_task(work).cancel)
        for held in book:
            write_lease_file(held)
            await broker.open(held)
        log.info("agent of node %s listening on %s", node, socket_path)
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await stop.wait()


def _serve_metrics(config: Config, agent: AgentService, book: LeaseBook) -> Callable[[], None]:
    """Serve the agent's metrics (docs/metrics.md); what stops serving them."""
    # Imported only now: prometheus-client takes 60 ms to import, and the hook may be waiting
    # for this agent to start (autostart) before its container can.
    from radium import metrics
    from radium.agent.metrics import AgentMetrics

    registry = metrics.new_registry()
    agent.answered = AgentMetrics(registry, lambda: len(book)).request
    endpoint = metrics.serve(config.agent.metrics, registry, "agent.metrics")
    assert endpoint is not None  # an address was configured
    return endpoint.close


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


async def _listen(path: str, serve: Callable[..., Awaitable[None]]) -> asyncio.AbstractServer:
    """A root-only unix socket server at ``path``."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    server = await asyncio.start_unix_server(serve, path=path)
    os.chmod(path, 0o600)
    return server


def _agent_hook(start_path: str) -> tuple[str, ...]:
    """The thin hook command: this installation's client on the start socket, the native one
    where it was built (1 ms a start instead of 10)."""
    scripts = sysconfig.get_path("scripts")
    renewed = nativeclient.renew_stale(Path(scripts))
    if renewed is not None:
        log.warning("the agent's native client: %s", renewed)
    native = nativeclient.installed(scripts)
    if native is not None:
        return (native, "--socket", start_path)
    client = os.path.join(scripts, "radium-agent-call")
    return (sys.executable, "-I", "-S", client, "--socket", start_path)


def _publish(config_path: str, start_path: str) -> str:
    """Link the start socket where the runtime's shell front looks for this config's agent."""
    os.makedirs(agentprotocol.RENDEZVOUS_DIR, mode=0o755, exist_ok=True)
    link = os.path.join(agentprotocol.RENDEZVOUS_DIR, agentprotocol.rendezvous_name(config_path))
    tmp = f"{link}.{os.getpid()}"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    os.symlink(start_path, tmp)
    os.replace(tmp, link)  # atomic: a front never finds no link while an agent runs
    return link


def _unpublish(link: str, start_path: str) -> None:
    """Remove the link, unless another agent of the same config has replaced it since."""
    with contextlib.suppress(OSError):
        if os.readlink(link) == start_path:
            os.unlink(link)
