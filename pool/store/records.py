"""The pool's records as JSON objects: how a key-value store (etcd) keeps them.

SQLite has columns (:mod:`radium.pool.store.sqlite_tables`); a key-value store has one value
per key, so each record is one JSON object. A lease's usage is not kept: the acceptors report
it anew.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from radium.pool.model import AcceptorState, Device, DeviceState, ImageStatus, Lease, Queue

__all__ = [
    "acceptor_from",
    "acceptor_record",
    "dump",
    "image_status_from",
    "image_status_record",
    "lease_from",
    "lease_record",
    "queue_from",
    "queue_record",
]

_LEASE_FIELDS = tuple(f.name for f in dataclasses.fields(Lease) if f.name != "usage")


def dump(record: dict[str, Any]) -> str:
    """A record as the compact, sorted JSON etcd keeps."""
    return json.dumps(record, separators=(",", ":"), sort_keys=True)


def lease_record(lease: Lease) -> dict[str, Any]:
    """The lease's record (every field but its usage)."""
    return {name: getattr(lease, name) for name in _LEASE_FIELDS}


def lease_from(record: dict[str, Any]) -> Lease:
    """The lease of a record."""
    return Lease(**{name: record[name] for name in _LEASE_FIELDS if name in record})


def acceptor_record(acceptor: AcceptorState) -> dict[str, Any]:
    """The acceptor's record, its devices included."""
    return {
        "name": acceptor.name,
        "data_address": acceptor.data_address,
        "labels": dict(acceptor.labels),
        "up": acceptor.up,
        "cpu_milli": acceptor.cpu_milli,
        "devices": [
            {**dataclasses.asdict(state.device), "labels": dict(state.device.labels)}
            for state in acceptor.devices.values()
        ],
    }


def acceptor_from(record: dict[str, Any]) -> AcceptorState:
    """As a restarted pool knows an acceptor: not registered until it registers again."""
    devices = sorted((Device(**d) for d in record["devices"]), key=lambda d: d.id)
    return AcceptorState(
        record["name"],
        record["data_address"],
        record["labels"],
        {d.id: DeviceState(d) for d in devices},
        record["up"],
        cpu_milli=record["cpu_milli"],
        registered=False,
    )


def queue_record(queue: Queue) -> dict[str, Any]:
    """The queue's record."""
    return dataclasses.asdict(queue)


def queue_from(record: dict[str, Any]) -> Queue:
    """The queue of a record."""
    return Queue(**record)


def image_status_record(status: ImageStatus) -> dict[str, Any]:
    """An image status's record."""
    return dataclasses.asdict(status)


def image_status_from(record: dict[str, Any]) -> ImageStatus:
    """The image status of a record."""
    return ImageStatus(**record)
