"""The pool's records: plain data, independent of gRPC and SQLite."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

ACTIVE, RELEASED, EXPIRED, REVOKED = "active", "released", "expired", "revoked"
MAX_GPUS = 1024


@dataclass(frozen=True)
class Device:
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


@dataclass
class AcceptorState:
    name: str
    data_address: str
    labels: Mapping[str, str]
    devices: dict[str, DeviceState]
    up: bool = True
    last_heartbeat: float = 0.0
    #: Registered with this pool process. A record restored from the store keeps its leases
    #: but gets no new one, and counts as down, until its acceptor registers again: until then
    #: its data address may be a dead process's.
    registered: bool = True

    @property
    def serving(self) -> bool:
        return self.up and self.registered


@dataclass(frozen=True)
class Request:
    gpus: int = 0
    fraction: float = 0.0
    memory_mib: int = 0
    selector: Mapping[str, str] = field(default_factory=dict)
    min_memory_mib: int = 0
    queue: str = ""
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
    acceptor: str
    #: device id -> MiB taken on it
    devices: Mapping[str, int]
    fraction: float


@dataclass
class Lease:
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
    #: From the acceptor's last heartbeat (not stored: it is refreshed every few seconds).
    cpu_percent: float = 0.0
    rss_bytes: int = 0

    @property
    def memory_mib(self) -> int:
        return max(self.devices.values(), default=0)


#: An image's state on an acceptor before it reported anything.
PENDING = "pending"


@dataclass(frozen=True)
class ImageStatus:
    ref: str
    acceptor: str
    state: str = PENDING
    progress: float = 0.0
    digest: str = ""
    error: str = ""
