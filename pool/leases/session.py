"""One client's lease calls, whatever carries them: a gRPC stream (docs/lease-stream.md) or a
lease socket (docs/lease-socket.md). The carrier hands each message in (:meth:`serve`), sends
each reply it is given (``send``) and says when replies have left (:meth:`sent`); the rules of
the lease stream live here, its window among them: a client has at most
:data:`radium.leaseclient.calls.WINDOW` calls unanswered, so what the pool holds for one client (its
waiting allocations, its replies not yet sent) is bounded whether or not it reads."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, AsyncIterator, Callable

from radium import rpc
from radium.errors import CapacityError, InvalidRequestError, RadiumError
from radium.leaseclient.calls import WINDOW
from radium.pool.leases.leasing import Leasing, failed_reply
from radium.pool.store.commits import committed
from radium.proto import pool_pb2 as pb

__all__ = ["LeaseSession", "grpc_stream"]

log = logging.getLogger(__name__)


class LeaseSession:
    """Calls that need not wait are answered in the order they came, once every change so far
    is committed (one commit for all the calls of a loop turn, docs/store.md); an allocation
    that waits runs as its own task, so it holds up nothing. After :meth:`end` nothing more is
    sent: a lease granted to a reply that can no longer go out is given back at once."""

    def __init__(
        self, leasing: Leasing, send: Callable[[pb.LeaseReply], None], window: int = WINDOW
    ) -> None:
        self._leasing = leasing
        self._send = send
        self._waiting: dict[int, asyncio.Task[None]] = {}
        self.ended = False
        self.window = window
        #: Calls received whose reply has not left yet (the carrier says so: :meth:`sent`).
        self.unanswered = 0

    def serve(self, call: pb.LeaseCall) -> None:
        """One message: a call and, in a batch, the calls of its ``more`` after it.
        :class:`CapacityError` (nothing of the message served) when it would take the client
        past its window: the carrier then ends the stream."""
        count = 1 + len(call.more)
        if self.unanswered + count > self.window:
            raise CapacityError(
                f"lease stream: {self.unanswered + count} calls unanswered, over the limit of "
                f"{self.window} a stream may have in flight",
                hint="a client waits for replies before it sends more (docs/lease-stream.md)",
            )
        self.unanswered += count
        self._serve(call, inner=False)
        for later in call.more:
            self._serve(later, inner=True)

    async def drain(self) -> None:
        """Once the client has sent its last call: wait for the answers still to come (those
        that wait for capacity, and those whose commit is still to come)."""
        await asyncio.gather(*self._waiting.values(), return_exceptions=True)
        with contextlib.suppress(RadiumError):  # a failed commit's answers say so already
            await committed(self._leasing.pool.commits)

    def sent(self, count: int) -> None:
        """``count`` replies left for the client: they count against its window no more."""
        self.unanswered -= count

    def end(self) -> None:
        """The client went away: withdraw its waiting allocations; send nothing more."""
        self.ended = True
        for task in self._waiting.values():
            task.cancel()

    def deliver(self, reply: pb.LeaseReply) -> None:
        """Send ``reply``, or, after the end, give back the lease it grants."""
        if not self.ended:
            self._send(reply)
        elif reply.WhichOneof("result") == "lease":  # granted as the client left
            self._leasing.give_back(reply.lease.id)

    def _serve(self, call: pb.LeaseCall, inner: bool) -> None:
        if call.id in self._waiting:
            error = InvalidRequestError(f"lease call {call.id} is still in flight")
            self.deliver(failed_reply(call.id, error))
        elif inner and call.more:
            error = InvalidRequestError(f"lease call {call.id} holds a batch of its own")
            self.deliver(failed_reply(call.id, error))
        elif (reply := self._leasing.answer(call)) is not None:
            self._leasing.pool.commits.when_committed(
                # A failed commit may have lost the call's change: the caller is not told of it.
                lambda error: self.deliver(
                    reply if error is None else failed_reply(reply.id, error)
                )
            )
        else:  # an allocation that must wait
            self._waiting[call.id] = asyncio.create_task(self._wait_then_reply(call))

    async def _wait_then_reply(self, call: pb.LeaseCall) -> None:
        try:
            lease = await self._leasing.allocate_waiting(call.allocate)
            self.deliver(pb.LeaseReply(id=call.id, lease=lease))
        except RadiumError as exc:
            self.deliver(failed_reply(call.id, exc))
        finally:
            self._waiting.pop(call.id, None)


async def grpc_stream(
    leasing: Leasing, calls: AsyncIterator[pb.LeaseCall], context: Any, window: int = WINDOW
) -> AsyncIterator[pb.LeaseReply]:
    """Serve one gRPC lease stream (docs/lease-stream.md) as a :class:`LeaseSession`. A client
    past its window (it sent more while its replies were not read) ends with
    ``RESOURCE_EXHAUSTED``: the replies it left unread are bounded by the window."""
    # Accepted: the client sends its first call only after this. A refusal that raced a
    # client's write would reach it as grpc's own INTERNAL status, not as the refusal.
    batches = rpc.takes_lease_batches(context.invocation_metadata())
    await context.send_initial_metadata((rpc.LEASE_BATCHES,) if batches else ())
    # Never full: a reply is queued for a call counted in the window (and one end mark).
    replies: asyncio.Queue[pb.LeaseReply | None] = asyncio.Queue(window + 1)
    session = LeaseSession(leasing, replies.put_nowait, window)

    async def read() -> None:
        try:
            async for call in calls:
                session.serve(call)
        except CapacityError as exc:
            log.warning("lease stream from %s: %s; ended it", context.peer(), exc.one_line())
            # From this task: the replies' task may be stuck in a write the client never reads.
            await rpc.abort(context, exc)
        await session.drain()  # the client sent its last call: its answers, then the end

    reader = asyncio.create_task(read())
    reader.add_done_callback(lambda _: replies.put_nowait(None))
    try:
        while (reply := await replies.get()) is not None:
            if batches:  # what else is ready goes in the same message
                reply.more.extend(rpc.queued_for_batch(replies))
            session.sent(1 + len(reply.more))
            yield reply
        await reader  # raises what ended the reading, if anything did
    finally:
        session.end()
        reader.cancel()
        while not replies.empty():  # never sent: a lease among them is given back
            if (unsent := replies.get_nowait()) is not None:
                session.deliver(unsent)
