"""Which host uid a lease's worker runs as: one of its own, or its GPU's shared MPS uid.

Each lease's worker gets a uid of its own (acceptor/uids.py), except the fractional leases of
an MPS GPU, which share that GPU's uid (MPS serialises clients of different uids;
acceptor/gpu_sharing.py, docs/security.md).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

from radium.acceptor.record import SlotRecord
from radium.acceptor.uids import UidLocks
from radium.errors import RadiumError
from radium.proto import pool_pb2 as pb

if TYPE_CHECKING:
    from radium.acceptor.gpu_sharing import Sharing

__all__ = ["WorkerUids"]


class WorkerUids:
    """Takes, keeps and releases workers' uids through ``locks`` (None: no sandbox, uid 0)."""

    def __init__(self, locks: UidLocks | None, sharing: Sharing | None) -> None:
        self.locks, self.sharing = locks, sharing

    def take(self, lease: pb.Lease) -> int:
        """A uid of its own for the lease, or its GPU's shared MPS uid for a fraction of an
        MPS GPU; refused for a fraction of a GPU that cannot share."""
        group = ""
        if self.sharing is not None:
            group = self.sharing.group(list(lease.device_ids), lease.fraction, lease.id)
        if self.locks is None:
            return 0
        if group and self.sharing is not None:
            return self.sharing.take(group, self.locks)
        return self.locks.take()

    def keep(self, uid: int, lease_id: str, home: Path, record: SlotRecord | None) -> int:
        """The uid of a slot kept from before a restart, locked again (a shared one counted)."""
        assert self.locks is not None
        group = ""
        if self.sharing is not None and record is not None:
            with contextlib.suppress(RadiumError):  # a GPU that no longer shares: its own
                group = self.sharing.group(list(record.devices), record.fraction, lease_id)
        kept = self.locks.keep_for(uid, home, group)
        if group and self.sharing is not None and self.locks.sharing(kept) == 1:
            self.sharing.own(group, kept)
        return kept

    def release(self, uid: int) -> None:
        if uid and self.locks is not None:
            if self.sharing is not None and self.locks.sharing(uid):
                self.sharing.release(uid, self.locks)  # a GPU's shared MPS uid
            else:
                self.locks.release(uid)
