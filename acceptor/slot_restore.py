"""The slots an acceptor kept from before it restarted: taken back from disk as it starts.

A slot outlives a restart of the acceptor (its worker does not); its record says which lease it
is and which uid its worker ran as, and the ``started`` mark whether a worker ever ran in it.
The pool's grant comes back when the acceptor registers again (:meth:`Slots.reconcile
<radium.acceptor.slots.Slots.reconcile>`), which tears down the slots it no longer lists.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable
from pathlib import Path

from radium.acceptor import slot_dir
from radium.acceptor.lease_slot import LeaseSlot, State
from radium.acceptor.record import SlotRecord
from radium.acceptor.slot_uids import WorkerUids

__all__ = ["restore"]


def restore(
    root: Path, lease_ids: Iterable[str], lock: threading.Lock, uids: WorkerUids
) -> dict[str, LeaseSlot]:
    """lease id -> its slot, for each of ``lease_ids`` with a slot under ``root``: made, or
    started when its mark says so, guarded by ``lock``. With uid locks (a sandbox), each uid is
    locked again; one another process took meanwhile is replaced in the slot's record. A slot
    whose record was never written is left out: it is torn down when met."""
    table: dict[str, LeaseSlot] = {}
    for lease_id in lease_ids:
        slot = slot_dir.path(root, lease_id)
        record = SlotRecord.load(slot / "lease.json")
        if record is None:
            continue
        if uids.locks is not None:
            kept = uids.keep(record.uid, lease_id, slot / "home", record)
            if kept != record.uid:
                record = dataclasses.replace(record, uid=kept)
                record.save(slot / "lease.json")
        state = State.STARTED if slot_dir.started(slot) else State.MADE
        table[lease_id] = LeaseSlot(lease_id, slot, lock, state, uid=record.uid, record=record)
    return table
