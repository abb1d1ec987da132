"""The agent's operations (docs/agent-agentprotocol.md), keep-alive and watching.

The pool is a :class:`LeasePool`: in the agent process a lease stream
(:class:`radium.leaseclient.stream.LeaseStream`), in unit tests an in-memory pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import time
from typing import Any, Awaitable, Callable, Protocol

from radium import agentprotocol
from radium.agent import claims
from radium.agent.book import Held, LeaseBook, process_started, write_lease_file
from radium.agent.broker import ConnectionBroker
from radium.agent.execdirs import is_exec_dir
from radium.errors import (
    AuthError,
    DeadlineError,
    InvalidRequestError,
    LeaseNotFoundError,
    RadiumError,
    UnavailableError,
)
from radium.proto import pool_pb2 as pb
from radium.shim.request import allocation

__all__ = [
    "HOLDER_GONE",
    "KEEPALIVE_TICK",
    "WATCH_INTERVAL",
    "AgentService",
    "LeasePool",
    "Serve",
    "lease_summary",
]

log = logging.getLogger(__name__)
WATCH_INTERVAL = 1.0
KEEPALIVE_TICK = 0.25
#: Why the watch releases a lease: the holder's process (a container's init, an exec) is gone.
HOLDER_GONE = "container process gone"
Serve = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class LeasePool(Protocol):
    """What the agent needs of the pool."""

    async def allocate(self, request: pb.AllocateRequest) -> pb.Lease: ...

    async def keep_alive(self, lease_id: str) -> pb.KeepAliveResponse: ...

    async def release(self, lease_id: str) -> bool: ...


def lease_summary(lease: pb.Lease, holder: str) -> dict[str, Any]:
    """What the container (lease.json) and the hook see of a lease: never its credential."""
    return {
        "id": lease.id,
        "acceptor": lease.acceptor,
        "data_address": lease.data_address,
        "devices": list(lease.device_ids),
        "fraction": lease.fraction,
        "memory_mib": lease.memory_mib,
        "holder": holder,
        "queue": lease.queue,
        "priority": lease.priority,
        "state": lease.state,
    }


class AgentService:
    """Answers requests on the control socket; keeps leases alive; watches their containers.

    ``started(pid)`` is a process's start time (0 when it is gone): injected so tests can end a
    container without starting one. ``exec_dir``: where ``radium exec`` makes its runtime
    directories (``hook.state_dir``); one whose holder died is removed with its lease.
    """

    def __init__(
        self,
        node: str,
        pool: LeasePool,
        book: LeaseBook,
        broker: ConnectionBroker,
        started: Callable[[int], float] = process_started,
        exec_dir: str = "",
    ) -> None:
        self.node, self.pool, self.book, self.broker, self.started = (
            node, pool, book, broker, started
        )  # fmt: skip
        self.exec_dir = exec_dir
        #: Requests being answered, when the last one ended, and whether the pool could not be
        #: reached (or refused the token) at the last lease call: an autostarted agent that is
        #: cut off from its pool and idle exits (process.py).
        self.busy, self.last_request, self.pool_failed = 0, time.monotonic(), False
        #: Containers whose lease is being taken from the pool (it may wait for capacity).
        self.acquiring: dict[str, asyncio.Task[dict[str, Any] | None]] = {}
        #: Told of each request answered: (op, error kind or "", seconds); the metrics.
        self.answered: Callable[[str, str, float], None] = lambda op, kind, seconds: None

    async def acquire(self, message: dict[str, Any]) -> dict[str, Any]:
        """The container's lease: the one it holds, the one being taken for it, or a new one.

        The pool call runs outside the book's lock: a request that waits for capacity (``wait``)
        must not hold up other containers' starts, nor the releases that would make room for it.
        """
        container = str(message.get("container", ""))
        annotations = message.get("request") or {}
        if not container or not isinstance(annotations, dict):
            raise InvalidRequestError("acquire needs a container id and its request")
        held = self.book.get(container)
        if held is not None:
            return {"ok": True, "lease": held.lease}
        taking = self.acquiring.get(container)
        if taking is None:  # no await since the checks: no second task for the container
            claim = annotations.get(claims.CLAIM)
            work = (
                claims.attach(self.book, self.broker, self.started, container, message, claim)
                if isinstance(claim, str)
                else self._take(container, message, annotations)
            )
            taking = asyncio.create_task(work)
            self.acquiring[container] = taking
            taking.add_done_callback(lambda _: self.acquiring.pop(container, None))
        return {"ok": True, "lease": await asyncio.shield(taking)}

    async def _take(
        self, container: str, message: dict[str, Any], annotations: dict[Any, Any]
    ) -> dict[str, Any] | None:
        wanted = allocation({str(k): str(v) for k, v in annotations.items()})
        if wanted is None:
            return None
        holder = f"{self.node}/{container}"
        try:
            lease = await self.pool.allocate(pb.AllocateRequest(holder=holder, **wanted))
        except (UnavailableError, AuthError, DeadlineError):  # cut off, not refused
            self.pool_failed = True
            raise
        self.pool_failed = False
        pid = int(message.get("pid", 0))
        summary = lease_summary(lease, holder)
        held = Held(
            container,
            lease.id,
            float(lease.ttl_seconds),
            pid,
            self.started(pid),
            str(message.get("runtime_dir", "")),
            summary,
            lease.credential,
        )
        await self.book.add(held)
        write_lease_file(held)
        try:
            await self.broker.open(held)
        except RadiumError:
            await self.release(container, "no data-plane socket")
            raise
        log.info("container %s: lease %s on %s %s", container, lease.id, lease.acceptor,
                 summary["devices"])  # fmt: skip
        return summary

    async def release(self, container: str, why: str) -> bool:
        held = await self.book.remove(container)
        if held is None:
            return False
        if why == HOLDER_GONE:
            self.clean_runtime_dir(held)
        self.broker.close(container)
        if held.claim:
            log.info("container %s: detached from %s (%s)", container, held.claim, why)
            return True
        await claims.detach_all(self.book, self.broker, container)
        try:
            await self.pool.release(held.lease_id)
        except RadiumError as exc:  # the pool will expire it after its TTL anyway
            log.warning("releasing lease %s: %s", held.lease_id, exc.one_line())
        log.info("container %s: lease %s released (%s)", container, held.lease_id, why)
        return True

    async def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        op = message.get("op")
        if op == agentprotocol.PING:
            return {"ok": True}
        if op == agentprotocol.ACQUIRE:
            return await self.acquire(message)
        if op == agentprotocol.RELEASE:
            released = await self.release(str(message.get("container", "")), "poststop")
            return {"ok": True, "released": released}
        if op == agentprotocol.LIST:
            return {"ok": True, "held": self.book.records()}
        raise InvalidRequestError(f"unknown agent operation {op!r}")

    def clean_runtime_dir(self, held: Held) -> None:
        """The runtime directory of a holder that died: an exec's is removed (nobody else
        will: ``radium exec`` was killed), a container's told its lease ended (its poststop
        hook removes the directory)."""
        path = os.path.normpath(held.runtime_dir) if held.runtime_dir else ""
        if path and self.exec_dir and is_exec_dir(path, self.exec_dir):
            shutil.rmtree(path, ignore_errors=True)  # a symlink there is refused, not followed
            log.info("container %s: removed its runtime directory %s", held.container, path)
            return
        held.lease.update(state="released", message="its holder process is gone")
        with contextlib.suppress(OSError):
            write_lease_file(held)

    def cut_off(self, grace: float) -> bool:
        """Nothing held, nothing asked for ``grace`` seconds, and the pool failed us last."""
        idle = time.monotonic() - self.last_request >= grace
        return self.pool_failed and idle and not self.busy and not self.acquiring and not self.book

    def track(self, serve: Serve) -> Serve:
        """``serve`` (a socket's client handler) counted as activity: no idle exit meanwhile."""

        async def tracked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.busy += 1
            try:
                await serve(reader, writer)
            finally:
                self.busy -= 1
                self.last_request = time.monotonic()

        return tracked

    async def serve_client(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        began, op = time.perf_counter(), ""
        try:
            line = await asyncio.wait_for(reader.readline(), timeout=agentprotocol.REQUEST_TIMEOUT)
            message = agentprotocol.parse_request(line)
            op = str(message.get("op"))
            reply = await self.handle(message)
        except RadiumError as exc:
            reply = agentprotocol.error_reply(exc)
        except (
            asyncio.TimeoutError,
            ConnectionError,
            asyncio.LimitOverrunError,
            ValueError,
        ) as exc:
            reply = agentprotocol.bad_request(exc)
        except Exception as exc:  # never leave a caller (a container's hook) waiting
            log.exception("agent request failed")
            reply = {"ok": False, "error": f"node agent internal error: {exc}"}
        kind = "" if reply.get("ok") else str(reply.get("kind", "internal"))
        self.answered(op, kind, time.perf_counter() - began)
        with contextlib.suppress(ConnectionError):
            writer.write(agentprotocol.encode(reply))
            await writer.drain()
        writer.close()

    async def keep_alive_forever(self, tick: float = KEEPALIVE_TICK) -> None:
        """Renew each lease at once (a resumed agent may be late), then every third of its TTL."""
        renewed: dict[str, float] = {}
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(tick)
            now = loop.time()
            current = {held.lease_id for held in self.book}
            renewed = {lease_id: at for lease_id, at in renewed.items() if lease_id in current}
            for held in self.book:
                if now - renewed.get(held.lease_id, float("-inf")) < held.ttl / 3:
                    continue
                renewed[held.lease_id] = now
                await self.keep_alive(held)

    async def keep_alive(self, held: Held) -> None:
        """Renew one lease; one the pool no longer knows is dropped and its container told."""
        try:
            answer = await self.pool.keep_alive(held.lease_id)
            self.pool_failed = False
            self.book.note_state(held, answer.state, answer.message)
        except LeaseNotFoundError as exc:
            log.warning("container %s: lease %s ended in the pool", held.container, held.lease_id)
            self.book.note_state(held, "ended", exc.message)
            await self.book.remove(held.container)
            self.broker.close(held.container)
        except RadiumError as exc:
            log.warning("keeping lease %s alive: %s", held.lease_id, exc.one_line())

    async def watch_forever(self, interval: float = WATCH_INTERVAL) -> None:
        while True:
            await asyncio.sleep(interval)
            await self.watch()

    async def watch(self) -> None:
        """Release the lease of every container whose init process is gone."""
        for held in self.book:
            if held.pid and self.started(held.pid) != held.pid_started:
                await self.release(held.container, HOLDER_GONE)
