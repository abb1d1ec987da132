"""Between the pool's records and their protobuf messages."""

from __future__ import annotations

from radium.pool.model import AcceptorState, Device, DeviceState, Lease, Request
from radium.proto import pool_pb2 as pb


def request_from_pb(message: pb.AllocateRequest) -> Request:
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
    )


def lease_to_pb(lease: Lease) -> pb.Lease:
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
        state=lease.state,
        expires_at=lease.expires_at,
        queue=lease.queue,
        cpu_percent=lease.cpu_percent,
        rss_bytes=lease.rss_bytes,
    )


def device_to_pb(device: Device) -> pb.Device:
    return pb.Device(
        id=device.id,
        vendor=device.vendor,
        model=device.model,
        memory_mib=device.memory_mib,
        labels=dict(device.labels),
    )


def acceptor_from_pb(message: pb.Acceptor) -> AcceptorState:
    devices = {
        d.id: DeviceState(Device(d.id, d.vendor, d.model, d.memory_mib, dict(d.labels)))
        for d in message.devices
    }
    return AcceptorState(message.name, message.data_address, dict(message.labels), devices)
