"""``radium pool serve``: the pool's gRPC server, until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import signal
import time
from typing import Mapping

import grpc.aio

from radium import metrics, rpc
from radium.config import Config, PoolConfig, QueueConfig
from radium.errors import (
    ConfigError,
    InvalidRequestError,
    RadiumError,
    UnavailableError,
)
from radium.pool import heap, queues
from radium.pool.acceptor_service import AcceptorService
from radium.pool.commits import Deferrable, GroupCommit, Immediate
from radium.pool.lease_listener import (
    LeaseListener,
    role_authorize,
    token_authorize,
)
from radium.pool.leasing import Leasing
from radium.pool.metrics import PoolMetrics, on_loop
from radium.pool.model import Queue
from radium.pool.policies import POLICIES
from radium.pool.queue_service import QueueService
from radium.pool.service import Pool, PoolService
from radium.pool.state import PoolState
from radium.pool.store import SQLiteStore, Store
from radium.proto import pool_pb2_grpc as pb_grpc

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
        from radium.pool import replica

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
    """Serve the pool from ``store`` until ``stop`` (or ``lost``: the leadership) is set."""
    settings = config.pool
    tls = settings.tls.enabled
    try:
        state = PoolState(
            store,
            lease_ttl=settings.lease_ttl,
            heartbeat_timeout=settings.heartbeat_timeout,
            now=time.time(),
            policy=POLICIES[settings.placement](),
        )
        configure_queues(state, settings.queues)
    except RadiumError:
        store.close()
        raise
    broken: list[UnavailableError] = []  # a commit failed: memory is ahead of the store
    failed = asyncio.Event()

    def fail(error: UnavailableError) -> None:
        broken.append(error)
        failed.set()

    commits = GroupCommit(store, fail) if isinstance(store, Deferrable) else Immediate()
    pool = Pool(state, grace=settings.preempt_grace, commits=commits)
    registry = metrics.new_registry()
    pool.observer = PoolMetrics(pool, registry, on_loop(asyncio.get_running_loop()))
    if tls:
        from radium.certs import SERVICE_ROLES

        check = rpc.role_check(SERVICE_ROLES)
    else:
        check = rpc.token_check(
            {
                POOL_SERVICE: settings.agent_tokens,
                ACCEPTOR_SERVICE: settings.acceptor_tokens,
                # Whoever may lease may administer queues; with TLS only the admin role may.
                QUEUES_SERVICE: settings.agent_tokens,
            }
        )
    server = grpc.aio.server(interceptors=[rpc.CallGuard(check)], options=rpc.SERVER_OPTIONS)
    pb_grpc.add_PoolServicer_to_server(PoolService(pool), server)
    pb_grpc.add_QueuesServicer_to_server(QueueService(pool), server)
    heartbeat = min(2.0, settings.heartbeat_timeout / 3)
    pb_grpc.add_AcceptorsServicer_to_server(AcceptorService(pool, heartbeat), server)
    try:
        if tls:
            port = server.add_secure_port(settings.listen, rpc.server_credentials(settings.tls))
        else:
            port = server.add_insecure_port(settings.listen)
    except RuntimeError as exc:
        port, failure = 0, str(exc)
    else:
        failure = "address in use or invalid"
    if port == 0:
        store.close()
        raise UnavailableError(
            f"cannot listen on {settings.listen}: {failure}", hint="is another pool running?"
        )
    try:
        endpoint = metrics.serve(settings.metrics, registry, "pool.metrics")
    except UnavailableError:
        store.close()
        raise
    listener = None
    try:
        if settings.lease_listen:
            listener = _lease_listener(pool, settings, check_tls=tls)
            await listener.start(settings.lease_listen)
    except RadiumError:
        if endpoint is not None:
            endpoint.close()
        store.close()
        raise
    await server.start()
    log.info(
        "pool listening on %s (%s; %s)",
        settings.listen,
        "mutual TLS" if tls else "tokens",
        f"etcd {', '.join(settings.etcd.endpoints)}"
        if settings.store == "etcd"
        else f"database {settings.db}",
    )
    reaper = asyncio.create_task(
        pool.reap_forever(min(1.0, settings.lease_ttl / 4), settings.ended_retention)
    )
    heap.settle()
    settler = asyncio.create_task(heap.settle_forever())
    if ready is not None:
        ready.set()
    try:
        await _first(stop, lost, failed)
    finally:
        reaper.cancel()
        settler.cancel()
        deposed = lost is not None and lost.is_set()
        if listener is not None:
            await listener.close()
        await server.stop(grace=0 if deposed else 2)  # deposed, it may change nothing more
        if isinstance(commits, GroupCommit):
            commits.close()
        if endpoint is not None:
            endpoint.close()
        store.close()
        log.info("pool stopped serving")
    if broken:
        raise broken[0]


def _lease_listener(pool: Pool, settings: PoolConfig, check_tls: bool) -> LeaseListener:
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
