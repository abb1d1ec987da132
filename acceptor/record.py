"""What the acceptor keeps of a lease it serves: ``lease.json`` in the lease's slot (0600)."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path

from radium.proto import pool_pb2 as pb

__all__ = ["SlotRecord"]


@dataclass(frozen=True)
class SlotRecord:
    """What the acceptor keeps of a lease it serves (``lease.json``)."""

    id: str
    devices: tuple[str, ...]
    fraction: float
    memory_mib: int
    holder: str
    credential: str
    #: The container's image and the worker mode asked for.
    image: str
    worker: str
    #: The host uid (and gid) the lease's worker runs as; 0 only when workers are unconfined.
    uid: int

    @classmethod
    def of(cls, lease: pb.Lease, uid: int) -> SlotRecord:
        return cls(
            id=lease.id,
            devices=tuple(lease.device_ids),
            fraction=lease.fraction,
            memory_mib=lease.memory_mib,
            holder=lease.holder,
            credential=lease.credential,
            image=lease.image,
            worker=lease.worker,
            uid=uid,
        )

    @classmethod
    def load(cls, path: Path) -> SlotRecord | None:
        try:
            data = json.loads(path.read_text())
            return cls(**{**data, "devices": tuple(data["devices"])})
        except (OSError, ValueError, TypeError, KeyError):
            return None

    def save(self, path: Path) -> None:
        """Written whole (a data-plane thread may read it at any moment), mode 0600."""
        partial = path.with_suffix(".tmp")
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(dataclasses.asdict(self), f)
        os.replace(partial, path)
