"""Between the pool's records and their protobuf messages."""

from __future__ import annotations

import dataclasses

from radium.pool.model import (
    AcceptorState,
    Device,
    DeviceState,
    ImageStatus,
    Lease,
    Queue,
    Request,
    Usage,
)
from radium.proto import pool_pb2 as pb

__all__ = [
    "USAGE_FIELDS",
    "acceptor_from_pb",
    "device_to_pb",
    "image_status_from_pb",
    "image_status_to_pb",
    "lease_to_pb",
    "queue_from_pb",
    "queue_to_pb",
    "request_from_pb",
    "usage_from_pb",
]


def request_from_pb(message: pb.AllocateRequest) -> Request:
    """The allocation a request message asks for."""
    return Request(
        gpus=message.gpus,
        fraction=message.fraction,
        memory_mib=message.memory_mib,
        selector=dict(message.selector),
        min_memory_mib=message.min_memory_mib,
        queue=message.queue,
        holder=message.holder,
        ttl=float(message.ttl_seconds),
        wait=message.wait_seconds,
        image=message.image,
        worker=message.worker,
        priority=message.priority,
        cpu_milli=message.cpu_milli,
    )


#: A lease's usage figures, named alike in Usage, LeaseUsage and Lease.
USAGE_FIELDS = tuple(f.name for f in dataclasses.fields(Usage))


def usage_from_pb(message: pb.LeaseUsage) -> Usage:
    """A lease's usage as its acceptor reported it."""
    return Usage(**{name: getattr(message, name) for name in USAGE_FIELDS})


def lease_to_pb(lease: Lease) -> pb.Lease:
    """The lease as the wire shows it, its usage included."""
    # Not dataclasses.asdict: it deep-copies, a tenth of a millisecond per lease.
    usage = {name: getattr(lease.usage, name) for name in USAGE_FIELDS}
    return pb.Lease(
        id=lease.id,
        acceptor=lease.acceptor,
        data_address=lease.data_address,
        device_ids=sorted(lease.devices),
        fraction=lease.fraction,
        memory_mib=lease.memory_mib,
        credential=lease.credential,
        ttl_seconds=int(lease.ttl),
        holder=lease.holder,
        state=lease.shown_state,
        expires_at=lease.expires_at,
        queue=lease.queue,
        created_at=lease.created_at,
        **usage,
        image=lease.image,
        worker=lease.worker,
        priority=lease.priority,
        preempted_at=lease.preempted_at,
        preempted_for=lease.preempted_for,
        cpu_milli=lease.cpu_milli,
    )


def queue_to_pb(queue: Queue) -> pb.Queue:
    """The queue as the wire shows it."""
    return pb.Queue(
        name=queue.name,
        deserved=queue.deserved,
        weight=queue.weight,
        limit=queue.limit,
        priority=queue.priority,
        parent=queue.parent,
    )


def queue_from_pb(message: pb.Queue) -> Queue:
    """The queue a message describes."""
    return Queue(
        name=message.name,
        deserved=message.deserved,
        weight=message.weight,
        limit=message.limit,
        priority=message.priority,
        parent=message.parent,
    )


def device_to_pb(device: Device) -> pb.Device:
    """The device as the wire shows it."""
    return pb.Device(
        id=device.id,
        vendor=device.vendor,
        model=device.model,
        memory_mib=device.memory_mib,
        labels=dict(device.labels),
    )


def image_status_to_pb(status: ImageStatus) -> pb.ImageStatus:
    """Where one acceptor stands with one image, as the wire shows it."""
    return pb.ImageStatus(
        ref=status.ref,
        acceptor=status.acceptor,
        state=status.state,
        progress=status.progress,
        digest=status.digest,
        error=status.error,
    )


def image_status_from_pb(message: pb.ImageStatus) -> ImageStatus:
    """Where one acceptor stands with one image, from its report."""
    return ImageStatus(
        message.ref,
        message.acceptor,
        message.state,
        min(max(message.progress, 0.0), 1.0),
        message.digest[:200],
        message.error[:2000],
    )


def acceptor_from_pb(message: pb.Acceptor) -> AcceptorState:
    """The acceptor a registration describes, with its devices, none of them taken yet."""
    devices = {
        d.id: DeviceState(Device(d.id, d.vendor, d.model, d.memory_mib, dict(d.labels)))
        for d in message.devices
    }
    return AcceptorState(
        message.name,
        message.data_address,
        dict(message.labels),
        devices,
        cpu_milli=message.cpu_milli,
    )
