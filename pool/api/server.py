"""``radium pool serve``: the pool's gRPC server, until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import signal
import time
from typing import Mapping

import grpc.aio
from prometheus_client import CollectorRegistry

from radium import gc_tuning, metrics, rpc, rpc_guard
from radium.configtree import Config, PoolConfig, QueueConfig
from radium.errors import (
    ConfigError,
    InvalidRequestError,
    UnavailableError,
)
from radium.pool.api.acceptor_service import AcceptorService
from radium.pool.api.metrics import PoolMetrics, on_loop
from radium.pool.api.queue_service import QueueService
from radium.pool.api.service import PoolService
from radium.pool.core import queues
from radium.pool.core.dispatcher import Dispatcher
from radium.pool.core.policies import POLICIES
from radium.pool.core.state import PoolState
from radium.pool.leases.leasing import Leasing
from radium.pool.leases.listener import (
    LeaseListener,
    role_authorize,
    token_authorize,
)
from radium.pool.model import Queue
from radium.pool.store.base import Store
from radium.pool.store.commits import Deferrable, GroupCommit, Immediate
from radium.pool.store.sqlite import SQLiteStore
from radium.proto import pool_pb2_grpc as pb_grpc

__all__ = ["configure_queues", "create_server", "lead", "serve"]

log = logging.getLogger(__name__)
POOL_SERVICE = "radium.v1.Pool"
ACCEPTOR_SERVICE = "radium.v1.Acceptors"
QUEUES_SERVICE = "radium.v1.Queues"


def configure_queues(state: PoolState, configured: Mapping[str, QueueConfig]) -> None:
    """The config file's queues, over those ``radium queues`` stored; checked as one tree."""
    merged = dict(state.queues.by_name)
    merged.update({name: Queue(name, **dataclasses.asdict(q)) for name, q in configured.items()})
    for name in configured:
        try:
            queues.checked(merged[name], merged)
        except InvalidRequestError as exc:
            raise ConfigError(f"config key pool.queues.{name}: {exc.message}") from exc
    for name in configured:
        state.store.save_queue(merged[name])
    state.set_queues(queues.Queues(merged.values()))


async def serve(config: Config, *, ready: asyncio.Event | None = None) -> None:
    """Serve until SIGTERM or SIGINT: alone on SQLite, or as one replica of several on etcd
    (it serves while it leads; docs/store.md)."""
    settings = config.pool
    tls = settings.tls.enabled
    if not tls and (not settings.agent_tokens or not settings.acceptor_tokens):
        raise ConfigError(
            "pool.agent_tokens and pool.acceptor_tokens must each list at least one token",
            hint="the pool refuses every unauthenticated call; 'radium up' generates tokens, "
            "radium certs makes certificates for [pool.tls]",
        )
    if settings.metrics:
        metrics.parse_address(settings.metrics, "pool.metrics")  # before anything starts
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    if settings.store == "etcd":
        from radium.pool.store import replica

        await replica.serve(config, stop, ready, lead)
    else:
        store = SQLiteStore(settings.db, settings.synchronous, ended_kept=settings.ended_kept)
        await lead(config, store, stop, ready)


async def lead(
    config: Config,
    store: Store,
    stop: asyncio.Event,
    ready: asyncio.Event | None = None,
    lost: asyncio.Event | None = None,
) -> None:
    """Serve the pool from ``store`` until ``stop`` (or ``lost``: the leadership) is set.

    Each resource is registered for its undoing as it is made (as containerd's shim manager
    does): a failure anywhere on the way up undoes what was made, in reverse, and so does the
    end; the lease socket closes before the gRPC server stops, the server before the commits
    and the store close."""
    settings = config.pool
    broken: list[UnavailableError] = []  # a commit failed: memory is ahead of the store
    failed = asyncio.Event()
    served = False
    try:
        async with contextlib.AsyncExitStack() as stack:
            stack.callback(store.close)
            pool, registry = _pool(store, settings, stack, broken, failed)
            server = create_server(pool, settings)
            stack.push_async_callback(_stop, server, lost)
            endpoint = metrics.serve(settings.metrics, registry, "pool.metrics")
            if endpoint is not None:
                stack.callback(endpoint.close)
            if settings.lease_listen:
                listener = _lease_listener(pool, settings, check_tls=settings.tls.enabled)
                await listener.start(settings.lease_listen)
                stack.push_async_callback(listener.close)
            # Bound last: a server that never started keeps its port for good (grpc), and a
            # replica that failed to lead must find it free when it leads again.
            _bind(server, settings)
            await server.start()
            served = True
            log.info(
                "pool listening on %s (%s; %s)",
                settings.listen,
                "mutual TLS" if settings.tls.enabled else "tokens",
                f"etcd {', '.join(settings.etcd.endpoints)}"
                if settings.store == "etcd"
                else f"database {settings.db}",
            )
            reap = pool.reap_forever(min(1.0, settings.lease_ttl / 4), settings.ended_retention)
            stack.callback(asyncio.create_task(reap).cancel)
            gc_tuning.settle()
            stack.callback(asyncio.create_task(gc_tuning.settle_forever()).cancel)
            if ready is not None:
                ready.set()
            await _first(stop, lost, failed)
    finally:
        if served:
            log.info("pool stopped serving")
    if broken:
        raise broken[0]


def _pool(
    store: Store,
    settings: PoolConfig,
    stack: contextlib.AsyncExitStack,
    broken: list[UnavailableError],
    failed: asyncio.Event,
) -> tuple[Dispatcher, CollectorRegistry]:
    """The pool over ``store``'s state, with its commits (closed by ``stack``) and its metrics.
    A commit that fails is added to ``broken`` and sets ``failed``: the pool stops serving."""
    state = PoolState(
        store,
        lease_ttl=settings.lease_ttl,
        heartbeat_timeout=settings.heartbeat_timeout,
        now=time.time(),
        policy=POLICIES[settings.placement](),
    )
    configure_queues(state, settings.queues)

    def fail(error: UnavailableError) -> None:
        broken.append(error)
        failed.set()

    commits = GroupCommit(store, fail) if isinstance(store, Deferrable) else Immediate()
    if isinstance(commits, GroupCommit):
        stack.callback(commits.close)
    pool = Dispatcher(state, grace=settings.preempt_grace, commits=commits)
    registry = metrics.new_registry()
    pool.observer = PoolMetrics(pool, registry, on_loop(asyncio.get_running_loop()))
    return pool, registry


def create_server(pool: Dispatcher, settings: PoolConfig) -> grpc.aio.Server:
    """The gRPC server of the pool's three services over ``pool``, with its call guard; not
    bound yet: :func:`lead` binds it last (:func:`_bind`), as a server that never started keeps
    its port for good."""
    tls = settings.tls.enabled
    if tls:
        from radium.certs import SERVICE_ROLES

        check = rpc_guard.role_check(SERVICE_ROLES)
    else:
        check = rpc_guard.token_check(
            {
                POOL_SERVICE: settings.agent_tokens,
                ACCEPTOR_SERVICE: settings.acceptor_tokens,
                # Whoever may lease may administer queues; with TLS only the admin role may.
                QUEUES_SERVICE: settings.agent_tokens,
            }
        )
    server = grpc.aio.server(interceptors=[rpc_guard.CallGuard(check)], options=rpc.SERVER_OPTIONS)
    pb_grpc.add_PoolServicer_to_server(PoolService(pool), server)
    pb_grpc.add_QueuesServicer_to_server(QueueService(pool), server)
    heartbeat = min(2.0, settings.heartbeat_timeout / 3)
    pb_grpc.add_AcceptorsServicer_to_server(AcceptorService(pool, heartbeat), server)
    return server


def _bind(server: grpc.aio.Server, settings: PoolConfig) -> None:
    """Listen on ``pool.listen`` (with TLS when configured), or say why not in one line."""
    try:
        if settings.tls.enabled:
            port = server.add_secure_port(settings.listen, rpc.server_credentials(settings.tls))
        else:
            port = server.add_insecure_port(settings.listen)
    except RuntimeError as exc:
        port, failure = 0, str(exc)
    else:
        failure = "address in use or invalid"
    if port == 0:
        raise UnavailableError(
            f"cannot listen on {settings.listen}: {failure}", hint="is another pool running?"
        )


async def _stop(server: grpc.aio.Server, lost: asyncio.Event | None) -> None:
    deposed = lost is not None and lost.is_set()
    await server.stop(grace=0 if deposed else 2)  # deposed, it may change nothing more


def _lease_listener(pool: Dispatcher, settings: PoolConfig, check_tls: bool) -> LeaseListener:
    """The lease socket (docs/lease-socket.md), authenticating as the gRPC lease stream does."""
    if not check_tls:
        return LeaseListener(Leasing(pool), token_authorize(settings.agent_tokens))
    from radium.certs import SERVICE_ROLES

    return LeaseListener(Leasing(pool), role_authorize(SERVICE_ROLES[POOL_SERVICE]), settings.tls)


async def _first(*events: asyncio.Event | None) -> None:
    waits = [asyncio.ensure_future(e.wait()) for e in events if e is not None]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
