"""A lease's slot on disk: made, told from a partial one, and removed.

Layout under ``<state_dir>/slots`` (0700, root; no worker ever sees it)::

    <lease>/lease.json   the lease, its data-plane credential and its worker uid (0600)
    <lease>/worker.pid   the worker's host pid (bubblewrap's, or the container's init)
    <lease>/notice       the preemption notice, once the pool preempted the lease
    <lease>/started      made before the lease's first worker starts
    <lease>/home/        the worker's only writable directory, owned by the lease's uid (0711)
    <lease>/control/     container mode only: the socket the worker connects back to
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from pathlib import Path

from radium.acceptor.record import SlotRecord

__all__ = ["NOTICE", "STARTED", "make", "path", "remove", "started"]

NOTICE = "notice"
#: Made before a lease's first worker starts.
STARTED = "started"
RECORD = "lease.json"
_LEASE_ID = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


def path(root: Path, lease_id: str) -> Path:
    """The lease's slot under ``root``; a ``ValueError`` for an id that is no plain name."""
    if not _LEASE_ID.match(lease_id):
        raise ValueError(f"refusing lease id {lease_id!r}")
    return root / lease_id


def make(slot: Path, record: SlotRecord) -> None:
    """The slot's directory, its worker's home and, last, its record: a slot with a record is
    whole."""
    slot.mkdir(mode=0o700, exist_ok=True)
    home = slot / "home"
    home.mkdir(exist_ok=True)
    if record.uid:
        os.chown(home, record.uid, record.uid)
    # o+x: the sandbox enters it before it drops to the uid (as a root without
    # CAP_DAC_OVERRIDE); nobody can list it, and only this lease's sandbox can reach it.
    home.chmod(0o711)
    record.save(slot / RECORD)


def started(slot: Path) -> bool:
    """A worker was ever started in the slot: the mark is made before one starts and outlives a
    restart of the acceptor (a slot of an acceptor before the mark has a worker.pid)."""
    return (slot / STARTED).exists() or (slot / "worker.pid").exists()


def remove(slot: Path, started: bool) -> None:
    """Remove the slot: what :func:`make` made takes a few unlinks (a churning pool sends
    thousands a second), anything a worker may have left takes a full walk."""
    if not started:
        with contextlib.suppress(OSError):  # not just that (or gone already): walk it
            for name in (RECORD, NOTICE):
                (slot / name).unlink(missing_ok=True)
            (slot / "home").rmdir()
            slot.rmdir()
            return
    shutil.rmtree(slot, ignore_errors=True)
