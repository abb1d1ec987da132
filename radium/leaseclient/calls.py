"""What both lease clients share, whatever carries their calls (a gRPC stream,
docs/lease-stream.md, or a lease socket, docs/lease-socket.md): ids, a deadline per call, replies
matched to their calls, and a lease that comes after its caller gave up released at once."""

from __future__ import annotations

import asyncio
import itertools
import logging

import grpc

from radium import rpc
from radium.errors import RadiumError
from radium.proto import pool_pb2 as pb

__all__ = ["WINDOW", "LeaseCalls"]

log = logging.getLogger(__name__)

#: Calls a client may have unanswered on one stream or connection (docs/lease-stream.md,
#: "Window"): it waits for replies before it sends more, and the pool ends the stream of a
#: client past it. So the replies the pool holds for a client that does not read are bounded.
WINDOW = 1024


class LeaseCalls:
    """Lease calls of one client, multiplexed on one connection that a subclass opens
    (:meth:`_open`, on first use and again after it broke) and feeds: it sends each call it is
    given (:meth:`_send`), hands each reply to :meth:`_receive`, and calls
    :meth:`_fail_pending` when it breaks."""

    def __init__(self, service: str, timeout: float, tls: bool) -> None:
        self._service = service
        self._timeout = timeout
        self._tls = tls
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[pb.LeaseReply]] = {}
        #: The pool takes batches on the open connection.
        self.batching = False
        #: Allocations given up on (deadline): a lease that still comes is released.
        self._abandoned: set[int] = set()
        #: Calls unanswered at most (the pool's window; a test may narrow it before the first
        #: call, which sizes the places).
        self.window = WINDOW
        #: Calls sent on the open connection whose reply has not come, waited for or not:
        #: each holds a place in the window until then (or until the connection breaks).
        self._unreplied: set[int] = set()
        self._places: asyncio.Semaphore | None = None  # made in the loop that uses it

    def _open(self) -> None:
        """Open the connection unless it is open."""
        raise NotImplementedError

    def _send(self, call: pb.LeaseCall) -> None:
        """Send ``call`` on the connection (once it is open), after those sent before it."""
        raise NotImplementedError

    async def connect(self) -> None:
        """Open the connection now rather than on the first call, and wait until the pool has
        accepted it."""
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    async def allocate(self, request: pb.AllocateRequest) -> pb.Lease:
        timeout = self._timeout + request.wait_seconds
        reply = await self._ask(pb.LeaseCall(allocate=request), timeout, abandon=True)
        return reply.lease

    async def keep_alive(self, lease_id: str) -> pb.KeepAliveResponse:
        reply = await self._ask(pb.LeaseCall(keep_alive=pb.LeaseRef(lease_id=lease_id)))
        return reply.kept

    async def release(self, lease_id: str) -> bool:
        reply = await self._ask(pb.LeaseCall(release=pb.LeaseRef(lease_id=lease_id)))
        return reply.released.released

    async def _ask(
        self, call: pb.LeaseCall, timeout: float | None = None, abandon: bool = False
    ) -> pb.LeaseReply:
        loop = asyncio.get_running_loop()
        expires = loop.time() + (timeout or self._timeout)
        await self._place(call, expires)
        self._open()
        call.id = next(self._ids)
        self._unreplied.add(call.id)
        future: asyncio.Future[pb.LeaseReply] = loop.create_future()
        self._pending[call.id] = future
        self._send(call)
        # A timer on the future itself: asyncio.wait_for adds a second future and callbacks,
        # 5 µs more per call (13 against 8 µs, measured), a tenth of a batched call's CPU.
        deadline = loop.call_at(expires, _expire, future)
        try:
            reply = await future
        except asyncio.TimeoutError:
            if abandon:
                self._abandoned.add(call.id)
            raise self._deadline(f"{call.WhichOneof('op')} unanswered") from None
        finally:
            deadline.cancel()
            self._pending.pop(call.id, None)
        if reply.WhichOneof("result") == "error":
            raise rpc.from_status(reply.error.code, reply.error.message, self._service)
        return reply

    async def _place(self, call: pb.LeaseCall, expires: float) -> None:
        """Wait, within the call's deadline, for a place in the window: the pool ends a stream
        with more than :data:`WINDOW` calls unanswered."""
        if self._places is None:
            self._places = asyncio.Semaphore(self.window)
        if not self._places.locked():
            await self._places.acquire()  # at once: no timer for the common case
            return
        try:
            left = expires - asyncio.get_running_loop().time()
            await asyncio.wait_for(self._places.acquire(), max(0.0, left))
        except asyncio.TimeoutError:
            what = f"{call.WhichOneof('op')} not sent: {self.window} calls already unanswered"
            raise self._deadline(what) from None

    def _replied(self, call_id: int) -> None:
        """The reply to ``call_id`` came: its place in the window is free."""
        if call_id in self._unreplied:
            self._unreplied.discard(call_id)
            assert self._places is not None
            self._places.release()

    def _deadline(self, what: str) -> RadiumError:
        """The error a unary call past its deadline raises: same leaf, line and hint."""
        return rpc.from_code(grpc.StatusCode.DEADLINE_EXCEEDED, what, self._service, self._tls)

    def _receive(self, message: pb.LeaseReply) -> None:
        """One message from the pool: a reply, or a batch of them (docs/lease-stream.md)."""
        for reply in (message, *message.more):
            if reply.id == 0 and reply.WhichOneof("result") == "error":  # why it is closing
                self._fail_pending(
                    rpc.from_status(reply.error.code, reply.error.message, self._service)
                )
                continue
            self._replied(reply.id)
            future = self._pending.get(reply.id)
            if future is not None and not future.done():
                future.set_result(reply)
            elif reply.id in self._abandoned:
                self._abandoned.discard(reply.id)
                if reply.WhichOneof("result") == "lease":
                    self._give_back(reply.lease.id)

    def _fail_pending(self, error: RadiumError) -> None:
        """Fail every call in flight (those still unsent too: a subclass drops them)."""
        for future in self._pending.values():
            if not future.done():
                future.set_exception(error)
        self._abandoned.clear()  # their outcome is unknown now; their TTL ends them
        for call_id in list(self._unreplied):  # no reply comes on a broken connection
            self._replied(call_id)

    def _give_back(self, lease_id: str) -> None:
        """Release a lease granted to a call that had stopped waiting for it."""

        async def release() -> None:
            try:
                await self.release(lease_id)
            except RadiumError as exc:
                log.warning("releasing abandoned lease %s: %s", lease_id, exc.one_line())

        asyncio.get_running_loop().create_task(release())


def _expire(future: asyncio.Future[pb.LeaseReply]) -> None:
    if not future.done():
        future.set_exception(asyncio.TimeoutError())
