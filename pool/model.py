"""The pool's records: plain data, independent of gRPC and SQLite."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Mapping

__all__ = [
    "DEFAULT_PRIORITY",
    "DEFAULT_QUEUE",
    "MAX_GPUS",
    "PENDING",
    "PRIORITY_CLASSES",
    "AcceptorState",
    "Device",
    "DeviceState",
    "ImageStatus",
    "Lease",
    "Placement",
    "PriorityClass",
    "Queue",
    "Request",
    "Usage",
    "preemption_notice",
]

ACTIVE, RELEASED, EXPIRED, REVOKED = "active", "released", "expired", "revoked"
#: An active lease under notice (shown, not stored: it is active with ``preempted_at`` set),
#: and the state it ends in when the grace period is over.
PREEMPTING, PREEMPTED = "preempting", "preempted"
DEFAULT_QUEUE = "default"
MAX_GPUS = 1024


@dataclass(frozen=True)
class Device:
    """One device an acceptor offers, as it registered it."""

    id: str
    vendor: str
    model: str
    memory_mib: int
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass
class DeviceState:
    """A device and what is allocated on it (mutable: the pool's in-memory view)."""

    device: Device
    used_mib: int = 0
    #: lease id -> MiB it holds on this device
    holders: dict[str, int] = field(default_factory=dict)

    @property
    def free_mib(self) -> int:
        return self.device.memory_mib - self.used_mib

    @property
    def allocated_fraction(self) -> float:
        memory = self.device.memory_mib
        return self.used_mib / memory if memory else 0.0


@dataclass
class AcceptorState:
    """One acceptor as the pool knows it: its address, labels and devices, whether it serves."""

    name: str
    data_address: str
    labels: Mapping[str, str]
    devices: dict[str, DeviceState]
    up: bool = True
    last_heartbeat: float = 0.0
    #: CPU the acceptor offers its workers, in thousandths of a core (0: not accounted).
    cpu_milli: int = 0
    cpu_used: int = 0
    #: Registered with this pool process. A record restored from the store keeps its leases
    #: but gets no new one, and counts as down, until its acceptor registers again: until then
    #: its data address may be a dead process's.
    registered: bool = True

    @property
    def serving(self) -> bool:
        return self.up and self.registered

    @property
    def cpu_free(self) -> int:
        """Thousandths of a core still free; -1 when the acceptor does not account CPU."""
        return self.cpu_milli - self.cpu_used if self.cpu_milli else -1


@dataclass(frozen=True)
class Queue:
    """A team's share of the pool, in GPUs (a fraction of one counts as that fraction)."""

    name: str
    #: Guaranteed: the queue gets this back by reclaiming when it asks for it.
    deserved: float = 0.0
    #: Idle GPUs are lent to queues over their quota in proportion to this.
    weight: float = 1.0
    #: The most the queue may hold at once; -1: no limit.
    limit: float = -1.0
    #: Higher is given its deserved quota, and then idle GPUs, first.
    priority: int = 0
    #: A department this project queue belongs to ("" for a top-level queue).
    parent: str = ""


@dataclass(frozen=True)
class PriorityClass:
    """A lease's priority class: its rank, and whether a higher one may preempt it."""

    name: str
    value: int
    preemptible: bool


#: KAI-Scheduler's classes, and "batch" for batch inference. Non-preemptible leases only use
#: their queue's deserved quota; preemptible ones may borrow and may be preempted.
PRIORITY_CLASSES = {
    c.name: c
    for c in (
        PriorityClass("inference", 125, False),
        PriorityClass("build", 100, False),
        PriorityClass("train", 50, True),
        PriorityClass("batch", 25, True),
    )
}
DEFAULT_PRIORITY = "train"


@dataclass(frozen=True)
class Request:
    """What an allocation asks for: whole GPUs, or a part of one by fraction or memory; where, for
    whom, and how long it may wait."""

    gpus: int = 0
    fraction: float = 0.0
    memory_mib: int = 0
    selector: Mapping[str, str] = field(default_factory=dict)
    min_memory_mib: int = 0
    #: Thousandths of a CPU core the lease's worker needs on the acceptor.
    cpu_milli: int = 0
    queue: str = ""
    #: A name from PRIORITY_CLASSES; "" is DEFAULT_PRIORITY.
    priority: str = ""
    holder: str = ""
    ttl: float = 0.0
    wait: float = 0.0
    image: str = ""
    worker: str = ""

    def describe(self) -> str:
        if self.gpus:
            what = f"{self.gpus} whole GPU{'s' if self.gpus > 1 else ''}"
        elif self.fraction:
            what = f"{self.fraction:g} of a GPU"
        else:
            what = f"{self.memory_mib} MiB of a GPU"
        extra = f" with {dict(self.selector)}" if self.selector else ""
        if self.min_memory_mib:
            extra += f" of at least {self.min_memory_mib} MiB"
        return what + extra


@dataclass(frozen=True)
class Placement:
    """Where the placer put a request: one acceptor and what it takes of each device."""

    acceptor: str
    #: device id -> MiB taken on it
    devices: Mapping[str, int]
    fraction: float


@dataclass(frozen=True)
class Usage:
    """What a lease's worker used, from its acceptor's last heartbeat: CPU, RSS and GPU use the
    acceptor measured, and the data-plane counters the worker reported (it runs the tenant's
    code, so they are the tenant's word; the acceptor only bounds them)."""

    cpu_percent: float = 0.0
    rss_bytes: int = 0
    calls: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    busy_seconds: float = 0.0
    errors: int = 0
    gpu_memory_bytes: int = 0
    gpu_sm_percent: float = 0.0


@dataclass
class Lease:
    """A granted lease: where, how much, for whom, until when, and its state."""

    id: str
    acceptor: str
    data_address: str
    devices: dict[str, int]
    fraction: float
    holder: str
    queue: str
    credential: str
    ttl: float
    expires_at: float
    created_at: float
    state: str = ACTIVE
    ended_at: float = 0.0
    #: The container's image and the worker mode asked for (the acceptor decides the rest).
    image: str = ""
    worker: str = ""
    cpu_milli: int = 0
    priority: str = DEFAULT_PRIORITY
    #: When the lease was told it is preempted (0: never), and for which queue.
    preempted_at: float = 0.0
    preempted_for: str = ""
    #: From the acceptor's last heartbeat (not stored: it is refreshed every few seconds).
    usage: Usage = Usage()

    @property
    def memory_mib(self) -> int:
        return max(self.devices.values(), default=0)

    @property
    def shown_state(self) -> str:
        return PREEMPTING if self.state == ACTIVE and self.preempted_at else self.state


#: An image's state on an acceptor before it reported anything.
PENDING = "pending"


@dataclass(frozen=True)
class ImageStatus:
    """Where one acceptor stands with one registered image."""

    ref: str
    acceptor: str
    state: str = PENDING
    progress: float = 0.0
    digest: str = ""
    error: str = ""


def preemption_notice(lease_id: str, queue: str, preempted_for: str, ends_at: float) -> str:
    """What a preempted lease's holder is told (KeepAlive, lease.json, ``LeasePreempted``)."""
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ends_at))
    return (
        f"lease {lease_id} of queue {queue or DEFAULT_QUEUE!r} was preempted for queue"
        f" {preempted_for or DEFAULT_QUEUE!r}: save your work, its worker stops at {when}"
    )
