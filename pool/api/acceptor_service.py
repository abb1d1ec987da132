"""The Acceptors gRPC service: registration, heartbeats, the assignment stream and image
reports (docs/design.md, section 4.5)."""

from __future__ import annotations

import asyncio
from typing import AsyncIterator

from radium.errors import InvalidRequestError, NotRegisteredError
from radium.pool.api.service import Context
from radium.pool.core import convert
from radium.pool.core.dispatcher import Dispatcher, Feed
from radium.pool.core.images import REMOVING
from radium.pool.leases.leasing import NAME_LIMIT
from radium.proto import pool_pb2 as pb
from radium.proto import pool_pb2_grpc as pb_grpc

__all__ = ["WATCH_BATCH", "WATCH_PACE", "AcceptorService"]

#: Most assignments in one message of a watch stream (a granted lease is about 200 bytes).
WATCH_BATCH = 500
#: A watch stream that batches sends at most one message this often, in seconds: what is
#: queued meanwhile goes in the next. A message costs the pool and the acceptor tens of µs of
#: gRPC each, a pool churning through thousands of leases a second would otherwise send one
#: or two assignments per turn of its loop, and a holder that connects before its grant's
#: notice arrives is waited for (``acceptor.dataplane.GRANT_WAIT``).
WATCH_PACE = 0.002


class AcceptorService(pb_grpc.AcceptorsServicer):
    """The Acceptors gRPC service: registration, heartbeats, each acceptor's assignment stream and
    its image reports."""

    def __init__(
        self, pool: Dispatcher, heartbeat_interval: float, watch_pace: float = WATCH_PACE
    ) -> None:
        self.pool = pool
        self.heartbeat_interval = heartbeat_interval
        self.watch_pace = watch_pace

    async def Register(self, request: pb.RegisterRequest, context: Context) -> pb.RegisterResponse:
        acceptor = convert.acceptor_from_pb(request.acceptor)
        if not acceptor.name or len(acceptor.name) > NAME_LIMIT or not acceptor.devices:
            raise InvalidRequestError("an acceptor registers with a name and at least one device")
        if any(d.device.memory_mib <= 0 for d in acceptor.devices.values()):
            raise InvalidRequestError("every device needs its memory size")
        active, revoked = self.pool.state.register(acceptor, self.pool.clock())
        self.pool.watchers[acceptor.name] = Feed()  # before any grant the answer does not list
        self.pool.ended(revoked)
        self.pool.serve_waiters()
        return pb.RegisterResponse(
            heartbeat_interval=self.heartbeat_interval,
            leases=[convert.lease_to_pb(le) for le in active],
            images=self.pool.images.missing_on(acceptor.name),
        )

    async def ReportImage(self, request: pb.ImageStatus, context: Context) -> pb.HeartbeatResponse:
        status = convert.image_status_from_pb(request)
        images = self.pool.images
        known = status.ref in images.refs or (status.ref, status.acceptor) in images.status
        if status.acceptor not in self.pool.state.acceptors or not known:
            raise InvalidRequestError(f"no image {status.ref} for {status.acceptor}")
        current = images.status.get((status.ref, status.acceptor))
        if current is not None and current.state == REMOVING and status.state != "removed":
            return pb.HeartbeatResponse()  # a pull's late news: the removal wins
        images.report(status)
        return pb.HeartbeatResponse()

    async def Heartbeat(
        self, request: pb.HeartbeatRequest, context: Context
    ) -> pb.HeartbeatResponse:
        usage = [(u.lease_id, convert.usage_from_pb(u)) for u in request.usage]
        if not self.pool.state.heartbeat(request.name, self.pool.clock(), usage):
            raise NotRegisteredError(
                f"acceptor {request.name!r} is not registered (or was marked down)",
                hint="register again",
            )
        return pb.HeartbeatResponse()

    async def Watch(
        self, request: pb.WatchRequest, context: Context
    ) -> AsyncIterator[pb.Assignment]:
        queue = self.pool.watchers.get(request.name)
        if queue is None or queue.followed:  # not registered since its last stream
            queue = self.pool.watchers[request.name] = Feed()
        queue.followed = True
        loop = asyncio.get_running_loop()
        pace = self.watch_pace
        sent = -pace
        try:
            while True:
                assignment = await queue.get()
                if request.batches:  # with it, those queued meanwhile
                    if (due := sent + pace - loop.time()) > 0:
                        await asyncio.sleep(due)
                    while len(assignment.then) < WATCH_BATCH and not queue.empty():
                        assignment.then.append(queue.get_nowait())
                yield assignment
                sent = loop.time()
        finally:
            if self.pool.watchers.get(request.name) is queue:
                del self.pool.watchers[request.name]
                self.pool.images.poke()
