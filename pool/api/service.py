"""The pool's gRPC servicer: thin, it reads the request, asks the :class:`Dispatcher` or a lease
operation, and raises a :class:`radium.errors.RadiumError` leaf for the call's guard to turn into
its status (radium/rpc_guard.py)."""

from __future__ import annotations

import logging
from typing import Any, AsyncIterator

from radium import __version__
from radium.pool.core import convert
from radium.pool.core.dispatcher import Dispatcher
from radium.pool.core.images import DONE_ADDING, DONE_REMOVING, check_ref
from radium.pool.leases.leasing import Leasing
from radium.pool.leases.listing import list_leases
from radium.pool.leases.session import grpc_stream
from radium.proto import pool_pb2 as pb
from radium.proto import pool_pb2_grpc as pb_grpc

__all__ = ["Context", "PoolService"]

log = logging.getLogger(__name__)
#: grpc.aio.ServicerContext (grpcio ships no type information).
Context = Any
#: `radium images add|rm` follow the acceptors at most this long.
IMAGE_FOLLOW = 3600.0


class PoolService(pb_grpc.PoolServicer):
    """The Pool gRPC service: leases (unary and streamed), listings, status, images."""

    def __init__(self, pool: Dispatcher) -> None:
        self.pool = pool
        self.leasing = Leasing(pool)

    async def Allocate(self, request: pb.AllocateRequest, context: Context) -> pb.Lease:
        return await self.leasing.allocate(request)

    async def KeepAlive(self, request: pb.LeaseRef, context: Context) -> pb.KeepAliveResponse:
        return self.leasing.keep_alive(request.lease_id)

    async def Release(self, request: pb.LeaseRef, context: Context) -> pb.ReleaseResponse:
        return await self.leasing.durably(lambda: self.leasing.release(request.lease_id))

    def Leases(
        self, requests: AsyncIterator[pb.LeaseCall], context: Context
    ) -> AsyncIterator[pb.LeaseReply]:
        return grpc_stream(self.leasing, requests, context)

    async def ListLeases(
        self, request: pb.ListLeasesRequest, context: Context
    ) -> pb.ListLeasesResponse:
        return list_leases(self.pool.state, request)

    async def Status(self, request: pb.StatusRequest, context: Context) -> pb.StatusResponse:
        state = self.pool.state
        devices = [
            pb.DeviceStatus(
                acceptor=acceptor.name,
                device=convert.device_to_pb(device.device),
                allocated_fraction=device.allocated_fraction,
                allocated_mib=device.used_mib,
                holders=sorted(
                    state.leases[lid].holder or lid for lid in device.holders if lid in state.leases
                ),
                up=acceptor.serving,
            )
            for acceptor, device in state.device_states()
        ]
        acceptors = [
            pb.AcceptorStatus(
                name=a.name,
                data_address=a.data_address,
                up=a.serving,
                last_heartbeat=a.last_heartbeat,
                devices=len(a.devices),
            )
            for a in state.acceptors.values()
        ]
        return pb.StatusResponse(
            devices=devices,
            acceptors=acceptors,
            active_leases=len(state.leases),
            version=__version__,
        )

    async def AddImage(
        self, request: pb.ImageRef, context: Context
    ) -> AsyncIterator[pb.ImageProgress]:
        ref = check_ref(request.ref)
        targets = self.pool.connected()
        self.pool.images.add(ref, targets, self.pool.clock())
        self.pool.tell(targets, pb.Assignment.PULL_IMAGE, ref)
        log.info("image %s registered; pulling on %s", ref, targets or "no acceptor yet")
        async for rows in self.pool.images.follow(
            ref, targets, DONE_ADDING, IMAGE_FOLLOW, self.pool.is_connected
        ):
            yield pb.ImageProgress(acceptors=[convert.image_status_to_pb(r) for r in rows])

    async def RemoveImage(
        self, request: pb.ImageRef, context: Context
    ) -> AsyncIterator[pb.ImageProgress]:
        targets = self.pool.connected()
        self.pool.images.remove(check_ref(request.ref), targets)
        self.pool.tell(targets, pb.Assignment.REMOVE_IMAGE, request.ref)
        async for rows in self.pool.images.follow(
            request.ref, targets, DONE_REMOVING, IMAGE_FOLLOW, self.pool.is_connected
        ):
            yield pb.ImageProgress(acceptors=[convert.image_status_to_pb(r) for r in rows])

    async def ListImages(
        self, request: pb.ListImagesRequest, context: Context
    ) -> pb.ListImagesResponse:
        images = self.pool.images
        rows = sorted(images.status.values(), key=lambda s: (s.ref, s.acceptor))
        unseen = sorted(images.refs - {s.ref for s in rows})  # no acceptor connected yet
        return pb.ListImagesResponse(
            images=[convert.image_status_to_pb(s) for s in rows]
            + [pb.ImageStatus(ref=ref, state="registered") for ref in unseen]
        )
