"""``radium acceptor serve``: register with the pool, heartbeat, follow lease assignments.

When the pool goes away the acceptor keeps its slots (leases keep being served) and registers
again as soon as the pool answers; the pool's reply lists the leases to reconcile with.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import time
from typing import Any, Callable

import grpc
import grpc.aio

from radium import metrics, rpc
from radium.acceptor import engines
from radium.acceptor.dataplane import DataPlane
from radium.acceptor.devices import Backend, CpuBackend
from radium.acceptor.gpu_sharing import Sharing
from radium.acceptor.images import ImageKeeper
from radium.acceptor.limits import Cgroups
from radium.acceptor.metrics import AcceptorCollector
from radium.acceptor.sandbox import Sandbox
from radium.acceptor.slots import Slots
from radium.configtree import AcceptorConfig
from radium.errors import AuthError, RadiumError, UnavailableError
from radium.proto import pool_pb2 as pb
from radium.proto import pool_pb2_grpc as pb_grpc

__all__ = [
    "FAILOVER_WINDOW",
    "FIRST_BACKOFF",
    "MAX_BACKOFF",
    "Acceptor",
    "choose",
    "confinement",
    "serve",
]

log = logging.getLogger(__name__)
#: Reconnecting: every tenth of a second for the first seconds of an outage (a pool replica
#: takes over in 1-2 s, and a lease is granted on an acceptor only once it registered with the
#: new leader), then slowly up.
FIRST_BACKOFF = 0.1
FAILOVER_WINDOW = 3.0
MAX_BACKOFF = 5.0


class Acceptor:
    """The acceptor: registers with the pool, follows its assignments, serves the data plane and
    reports usage."""

    def __init__(self, config: AcceptorConfig, backend: Backend | None = None) -> None:
        self.config = config
        self.name = config.name or socket.gethostname()
        self.backend = backend or choose(config)
        self.engine = engines.choose(config.engine, config.engine_address)
        sandbox = confinement(config)
        limits = Cgroups()
        if sandbox is not None:
            limits.check()  # a tenant's worker never runs without its caps
        #: How fractional leases share this acceptor's GPUs (one MPS daemon per GPU).
        self.sharing = Sharing(config, self.backend.devices())
        try:
            self.slots = Slots(
                config.state_dir,
                self.backend,
                sandbox=sandbox,
                limits=limits,
                engine=self.engine,
                sharing=self.sharing,
            )
        except BaseException:
            self.sharing.close()  # no daemon outlives an acceptor that did not start
            raise
        self.metadata = rpc.metadata(config.token)
        self.registrations = 0
        #: Where the data plane really listens (the config may say port 0).
        self.data_address = config.data_address
        self.stub: pb_grpc.AcceptorsStub | None = None
        #: The last pending slot change of each lease (see in_order).
        self.changes: dict[str, asyncio.Task[None]] = {}
        self.images = ImageKeeper(self.name, self.engine, self.report_image)

    async def report_image(self, status: pb.ImageStatus) -> object:
        if self.stub is None:
            raise UnavailableError("not connected to the pool")
        return await self.stub.ReportImage(status, metadata=self.metadata, timeout=10)

    def info(self) -> pb.Acceptor:
        return pb.Acceptor(
            name=self.name,
            data_address=self.data_address,
            devices=self.sharing.labelled(self.backend.devices()),
            labels={"backend": self.backend.name},
            cpu_milli=len(os.sched_getaffinity(0)) * 1000,
        )

    async def session(self, stub: pb_grpc.AcceptorsStub) -> None:
        """One registration's life: register, then heartbeat and watch until something fails."""
        reply = await stub.Register(
            pb.RegisterRequest(acceptor=self.info()), metadata=self.metadata, timeout=10
        )
        self.registrations += 1
        self.stub = stub
        await asyncio.to_thread(self.slots.reconcile, list(reply.leases))
        for ref in reply.images:  # registered while we were away, or not pulled yet
            self.images.start(self.images.pull(ref))
        log.info("registered with the pool as %s (%d active leases)", self.name, len(reply.leases))
        interval = reply.heartbeat_interval or self.config.heartbeat_interval
        tasks = [
            asyncio.create_task(self.heartbeats(stub, interval)),
            asyncio.create_task(self.watch(stub)),
        ]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()
        finally:
            for task in tasks:
                task.cancel()

    async def heartbeats(self, stub: pb_grpc.AcceptorsStub, interval: float) -> None:
        while True:
            request = pb.HeartbeatRequest(name=self.name, usage=self.slots.usage())
            await stub.Heartbeat(request, metadata=self.metadata, timeout=max(interval, 2.0))
            await asyncio.sleep(interval)

    async def watch(self, stub: pb_grpc.AcceptorsStub) -> None:
        request = pb.WatchRequest(name=self.name, batches=True)
        async for batch in stub.Watch(request, metadata=self.metadata):
            for assignment in (batch, *batch.then):
                self.assigned(assignment)
        raise UnavailableError("the pool closed the assignment stream")

    def assigned(self, assignment: pb.Assignment) -> None:
        """Apply one of the pool's assignments."""
        # A grant and a revocation of a lease whose slot was never made stay on this
        # loop: no thread, no file (a churning pool sends thousands a second).
        if assignment.kind == pb.Assignment.GRANTED:
            if self.slots.grant(assignment.lease):
                self.in_order(assignment.lease.id, self.slots.make, assignment.lease.id)
        elif assignment.kind == pb.Assignment.REVOKED:
            if not self.slots.revoke(assignment.lease.id):
                self.in_order(assignment.lease.id, self.slots.teardown, assignment.lease.id)
        elif assignment.kind == pb.Assignment.PREEMPTED:
            self.in_order(assignment.lease.id, self.slots.preempt, assignment.lease)
        elif assignment.kind == pb.Assignment.PULL_IMAGE:
            self.images.start(self.images.pull(assignment.image))
        elif assignment.kind == pb.Assignment.REMOVE_IMAGE:
            self.images.start(self.images.remove(assignment.image))

    def in_order(self, lease_id: str, change: Callable[..., None], *args: Any) -> None:
        """Apply a slot change in a thread, after the earlier changes of the same lease: a
        container worker takes seconds to stop, and other leases' grants must not wait."""
        previous = self.changes.get(lease_id)

        async def apply() -> None:
            if previous is not None:
                await asyncio.wait([previous])
            try:
                await asyncio.to_thread(change, *args)
            except Exception:  # one lease's failure must not stop the others' changes
                log.exception("lease %s: %s failed", lease_id, change.__name__)

        task = asyncio.create_task(apply())
        self.changes[lease_id] = task
        task.add_done_callback(
            lambda done: (
                self.changes.pop(lease_id, None) if self.changes.get(lease_id) is done else None
            )
        )

    async def run(self, stop: asyncio.Event) -> None:
        backoff = FIRST_BACKOFF
        outage_began: float | None = None
        async with rpc.aio_channel(self.config.pool, self.config.tls) as channel:
            stub = pb_grpc.AcceptorsStub(channel)
            while not stop.is_set():
                registrations = self.registrations
                session = asyncio.create_task(self.session(stub))
                stopper = asyncio.create_task(stop.wait())
                await asyncio.wait([session, stopper], return_when=asyncio.FIRST_COMPLETED)
                stopper.cancel()
                if stop.is_set():
                    session.cancel()
                    break
                now = time.monotonic()
                served = self.registrations > registrations
                if served or outage_began is None:  # a new outage
                    backoff, outage_began, level = FIRST_BACKOFF, now, logging.WARNING
                elif now - outage_began < FAILOVER_WINDOW:  # said once already
                    backoff, level = FIRST_BACKOFF, logging.DEBUG
                else:
                    backoff, level = min(backoff * 1.3, MAX_BACKOFF), logging.WARNING
                try:
                    session.result()
                except grpc.RpcError as exc:
                    service = f"pool at {self.config.pool}"
                    # A session that registered had its certificate accepted: a connection
                    # closed under it is the pool going away, not a refusal of the certificate.
                    tls_refusal_possible = self.config.tls.enabled and not served
                    error = rpc.from_rpc_error(exc, service, tls_refusal_possible)
                    level = logging.ERROR if isinstance(error, AuthError) else level
                    log.log(level, "%s; retrying in %.1fs", error.one_line(), backoff)
                except RadiumError as exc:
                    log.log(level, "%s; retrying in %.1fs", exc.one_line(), backoff)
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=backoff)


def confinement(config: AcceptorConfig) -> Sandbox | None:
    """The workers' sandbox; None (loudly) only when the config turns it off for tests."""
    if config.sandbox.enabled:
        return Sandbox(config.sandbox)
    log.warning(
        "acceptor.sandbox.enabled = false: lease workers run UNCONFINED, as root, beside this "
        "acceptor's secrets; for tests only, never on a pool that serves tenants"
    )
    return None


async def serve(config: AcceptorConfig) -> None:
    """``radium acceptor serve``: until SIGTERM or SIGINT."""
    if config.metrics:
        metrics.parse_address(config.metrics, "acceptor.metrics")  # before anything starts
    acceptor = Acceptor(config)
    log.info(
        "acceptor %s: %d %s devices, data plane %s",
        acceptor.name,
        len(acceptor.backend.devices()),
        acceptor.backend.name,
        config.data_address,
    )
    registry = metrics.new_registry()
    registry.register(AcceptorCollector(acceptor.slots, acceptor.backend))
    try:
        endpoint = metrics.serve(config.metrics, registry, "acceptor.metrics")
    except BaseException:
        acceptor.sharing.close()
        raise
    plane = DataPlane(config.data_address, acceptor.slots)
    try:
        plane.start()
    except BaseException:
        if endpoint is not None:
            endpoint.close()
        acceptor.sharing.close()
        raise
    acceptor.data_address = plane.address
    acceptor.sharing.start_watch()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        await acceptor.run(stop)
    finally:
        plane.stop()
        if endpoint is not None:
            endpoint.close()
        acceptor.slots.close()
        acceptor.sharing.close()  # its MPS daemons, after the workers that were their clients


def choose(config: AcceptorConfig) -> Backend:
    """The configured backend; "auto" takes NVML where it works, else the CPU backend."""
    if config.backend in ("auto", "nvml"):
        from radium.acceptor.nvidia import NvmlBackend  # pynvml: only where asked for

        try:
            return NvmlBackend()
        except RadiumError as exc:
            if config.backend == "nvml":
                raise
            log.info("%s; using the CPU backend", exc.message)
    return CpuBackend(config.cpu_devices, config.cpu_memory_mib)
