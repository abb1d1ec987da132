"""The lease operations (allocate, keep-alive, release), served both as unary calls and as
messages on the lease stream (docs/lease-stream.md)."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Callable, TypeVar

from radium import rpc
from radium.errors import CapacityError, InvalidRequestError, RadiumError
from radium.pool.core import convert
from radium.pool.core.scheduler import no_capacity
from radium.pool.model import Lease, Request, preemption_notice
from radium.pool.store.commits import committed
from radium.proto import pool_pb2 as pb

if TYPE_CHECKING:  # service.py imports this module
    from radium.pool.core.dispatcher import Dispatcher

__all__ = ["NAME_LIMIT", "Leasing", "failed_reply"]

log = logging.getLogger(__name__)
T = TypeVar("T")
#: Longest holder, queue or acceptor name (a DNS name's length).
NAME_LIMIT = 253


class Leasing:
    """What a holder asks of the pool about its leases, apart from how it asked."""

    def __init__(self, pool: Dispatcher) -> None:
        self.pool = pool

    def allocate_now(self, request: pb.AllocateRequest) -> pb.Lease | None:
        """The lease, granted without waiting; None when it must wait for capacity
        (:meth:`allocate_waiting`). Raises what refuses it."""
        wanted = convert.request_from_pb(request)
        began = time.perf_counter()
        try:
            if len(wanted.holder) > NAME_LIMIT or len(wanted.queue) > NAME_LIMIT:
                raise InvalidRequestError("holder and queue names are limited to 253 characters")
            if self.pool.waiters:  # others are waiting already: in line behind them
                return None
            shown = self.pool.grant_shown(wanted)[1]
        except CapacityError as exc:
            if wanted.wait > 0:
                return None
            self._observe(exc, wanted, began)
            raise
        except RadiumError as exc:
            self._observe(exc, wanted, began)
            raise
        self._observe(None, wanted, began)
        return shown

    async def allocate_waiting(self, request: pb.AllocateRequest) -> pb.Lease:
        """The lease, once capacity frees up within the request's ``wait_seconds``."""
        wanted = convert.request_from_pb(request)
        began = time.perf_counter()
        future: asyncio.Future[Lease] = asyncio.get_running_loop().create_future()
        self.pool.waiters.add(wanted, future)
        error: BaseException | None = None
        try:
            self.pool.serve_waiters()
            # asyncio.wait, not wait_for: on Python 3.11 wait_for swallows a cancellation that
            # comes with the grant, and the lease would go to a caller that is gone.
            if not (await asyncio.wait([future], timeout=wanted.wait))[0]:
                when = f" within {wanted.wait:g}s" if wanted.wait else " now (others wait ahead)"
                raise no_capacity(wanted, self.pool.state.placer, when)
            lease = convert.lease_to_pb(future.result())  # or the refusal it ended with
            # Granted by another call's change, maybe not committed yet.
            await committed(self.pool.commits)
            return lease
        except BaseException as exc:  # refused, timed out, or the caller went away
            error = exc
            raise
        finally:
            granted = future.done() and not future.cancelled() and future.exception() is None
            future.cancel()  # withdraws it if it still waits
            if granted and error is not None:  # the grant came as the caller went away
                self.give_back(future.result().id)
            self._observe(error, wanted, began)

    async def allocate(self, request: pb.AllocateRequest) -> pb.Lease:
        lease = await self.durably(lambda: self.allocate_now(request))
        return lease if lease is not None else await self.allocate_waiting(request)

    async def durably(self, change: Callable[[], T]) -> T:
        """``change()``'s result once its changes are committed (docs/store.md, group commit):
        a unary call's answer."""
        with self.pool.commits.deferred():
            result = change()
        await committed(self.pool.commits)
        return result

    def _observe(self, error: BaseException | None, wanted: Request, began: float) -> None:
        self.pool.observer.allocation(error, wanted.wait > 0, time.perf_counter() - began)

    def give_back(self, lease_id: str) -> None:
        """End a lease granted to a caller that went away before it could be told."""
        self.release(lease_id)
        log.info("lease %s given back: its caller went away as it was granted", lease_id)

    def keep_alive(self, lease_id: str) -> pb.KeepAliveResponse:
        state = self.pool.state
        expires_at = state.keep_alive(lease_id, self.pool.clock())
        lease = state.leases[lease_id]
        notice = (
            preemption_notice(lease.id, lease.queue, lease.preempted_for, lease.expires_at)
            if lease.preempted_at
            else ""
        )
        return pb.KeepAliveResponse(expires_at=expires_at, state=lease.shown_state, message=notice)

    def release(self, lease_id: str) -> pb.ReleaseResponse:
        lease = self.pool.state.release(lease_id, self.pool.clock())
        if lease is not None:
            self.pool.ended([lease])
        return pb.ReleaseResponse(released=lease is not None)

    def answer(self, call: pb.LeaseCall) -> pb.LeaseReply | None:
        """The reply to a call that needs no waiting; None for an allocation that must wait."""
        op = call.WhichOneof("op")
        with self.pool.commits.deferred():
            try:
                if op == "allocate":
                    lease = self.allocate_now(call.allocate)
                    return None if lease is None else pb.LeaseReply(id=call.id, lease=lease)
                if op == "release":
                    return pb.LeaseReply(id=call.id, released=self.release(call.release.lease_id))
                if op == "keep_alive":
                    return pb.LeaseReply(id=call.id, kept=self.keep_alive(call.keep_alive.lease_id))
                raise InvalidRequestError(f"lease call {call.id} names no operation")
            except RadiumError as exc:
                return failed_reply(call.id, exc)


def failed_reply(call_id: int, error: RadiumError) -> pb.LeaseReply:
    """The reply to call ``call_id`` that failed with ``error``: the code and line a unary call
    would have ended with."""
    code, message = rpc.status_of(error)
    return pb.LeaseReply(id=call_id, error=pb.CallError(code=code.value[0], message=message))
