"""One lease's life on this acceptor, as a state machine (as containerd's ``init_state.go`` keeps
a task's): every change of state goes through :meth:`LeaseSlot.transition`, which refuses a move
the life below does not have.

::

    GRANTED --make--> MADE --first worker--> STARTED --replaced--> STARTED
       |                |                       |
       +----------------+-------ended-----------+--> ENDED

- ``GRANTED``: the pool granted it; it is kept in memory only (a lease that never calls costs no
  directory). Its uid is taken, and its slot made, when it is first needed.
- ``MADE``: its slot exists on disk (directory, record, home), owned by its uid; no worker yet.
- ``STARTED``: a worker was started in it (it may have died since: the next connection starts
  another). The ``started`` mark on disk says so across a restart of the acceptor.
- ``ENDED``: torn down (or revoked before a slot was made); nothing of it is left, and a thread
  that held it finds it ended.

Whether the pool's grant still stands is apart from the state: :attr:`LeaseSlot.lease` is None
once the pool revoked it (its teardown follows), and for a slot kept from before a restart until
the pool lists it again.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path

from radium.acceptor import slot_dir
from radium.acceptor.container_worker import ContainerWorker
from radium.acceptor.launcher import Launcher, Worker
from radium.acceptor.record import SlotRecord
from radium.acceptor.slot_uids import WorkerUids
from radium.errors import InternalError, LeaseNotFoundError
from radium.proto import pool_pb2 as pb
from radium_interposer.control import Counters

__all__ = ["LeaseSlot", "State"]

log = logging.getLogger(__name__)


class State(enum.Enum):
    """Where a lease is in its life on this acceptor."""

    GRANTED = "granted"
    MADE = "made"
    STARTED = "started"
    ENDED = "ended"


#: The moves a lease's life has; any other is a bug.
MOVES: dict[State, frozenset[State]] = {
    State.GRANTED: frozenset({State.MADE, State.ENDED}),
    State.MADE: frozenset({State.STARTED, State.ENDED}),
    State.STARTED: frozenset({State.STARTED, State.ENDED}),
    State.ENDED: frozenset(),
}


@dataclass(eq=False)
class LeaseSlot:
    """One lease served here: its state, the pool's grant, its uid, record and worker, and the
    moves that change them.

    ``lock`` serialises making its slot and starting, replacing and stopping its worker; the
    fields are read and written under ``guard`` (the table's lock, ``Slots.lock``), except
    ``worker``, which its holder's threads read without it (a reference read is atomic).
    """

    id: str
    dir: Path
    guard: threading.Lock
    state: State = State.GRANTED
    #: The pool's grant while it stands.
    lease: pb.Lease | None = None
    #: Its worker's uid: set once taken (before its slot is on disk), kept until it ends.
    uid: int | None = None
    #: What ``lease.json`` holds, once the slot is made.
    record: SlotRecord | None = None
    worker: Worker | None = None
    #: The data-plane counters its worker last answered (the heartbeat thread).
    counted: Counters | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def transition(self, to: State) -> None:
        """Move to ``to``; an ``InternalError`` for a move the life above does not have."""
        if to not in MOVES[self.state]:
            raise InternalError(
                f"lease {self.id}: a {self.state.value} slot cannot become {to.value}"
            )
        self.state = to

    def live_worker(self) -> Worker | None:
        worker = self.worker
        return worker if worker is not None and worker.alive() else None

    def ensure_made(self, uids: WorkerUids) -> bool:
        """Its slot, made now (its uid taken from ``uids``) if it is only granted: GRANTED ->
        MADE. False for a lease no longer granted (revoked before, or meanwhile)."""
        with self.lock:
            if self.state in (State.MADE, State.STARTED):
                return True
            with self.guard:
                lease = self.lease if self.state is State.GRANTED else None
            if lease is None:
                return False
            # Outside the guard: taking a uid looks at every process of the host.
            uid = uids.take(lease)
            with self.guard:
                taken = self.state is State.GRANTED and self.lease is not None
                if taken:
                    self.uid = uid  # taken: no other slot gets it
            if not taken:  # revoked meanwhile
                uids.release(uid)
                return False
            self.make(SlotRecord.of(lease, uid))
        return True

    def make(self, record: SlotRecord) -> None:
        """Make its slot on disk for ``record`` (its uid taken already): GRANTED -> MADE."""
        slot_dir.make(self.dir, record)
        with self.guard:
            self.record = record
            self.transition(State.MADE)
        log.debug(
            "slot made for lease %s (devices %s, holder %s, uid %d)",
            self.id,
            list(record.devices),
            record.holder,
            record.uid,
        )

    def start(self, launcher: Launcher) -> Worker:
        """Its live worker, started now if it has none (or a dead one): -> STARTED.

        Idempotent: the lease's first connection may race its grant here (the holder learns of
        the lease as the acceptor does), and both must find the same worker.
        """
        live = self.live_worker()
        if live is not None:
            return live
        with self.lock:
            live = self.live_worker()
            if live is not None:
                return live
            record = self.record
            if self.state is State.ENDED or record is None:  # torn down meanwhile
                raise LeaseNotFoundError(f"lease {self.id} has ended")
            dead, self.worker = self.worker, None
            if dead is not None:
                log.warning("lease %s: worker died; starting a new one", self.id)
                dead.stop()
            (self.dir / slot_dir.STARTED).touch()
            with self.guard:
                self.transition(State.STARTED)
            worker, applied = launcher.start(record, self.dir)
            self.worker = worker
            with contextlib.suppress(FileNotFoundError):  # a replacement is told again
                worker.notify((self.dir / slot_dir.NOTICE).read_text())
        log.info(
            "lease %s: %s worker %s on %s as uid %d (%s)",
            self.id,
            worker.mode,
            worker.image if isinstance(worker, ContainerWorker) else worker.pid,
            list(record.devices),
            record.uid,
            ", ".join(applied) or ("no host limits" if launcher.sandbox else "unconfined"),
        )
        return worker

    def preempted(self, notice: str) -> None:
        """Keep the pool's preemption notice (for a successor worker) and tell its worker."""
        with self.lock:
            if self.state is State.ENDED:
                return
            (self.dir / slot_dir.NOTICE).write_text(notice)
            worker = self.live_worker()
        if worker is not None:
            worker.notify(notice)
        log.info("%s", notice)

    def end(self, launcher: Launcher) -> tuple[bool, bool]:
        """Stop its worker, kill what is left of it, remove its slot: -> ENDED. (Nothing of it
        is left, a worker was ever started.)"""
        with self.lock:
            record = self.record or SlotRecord.load(self.dir / slot_dir.RECORD)
            worker, self.worker = self.worker, None
            if worker is not None:
                worker.stop()
            # Only a worker runs as the lease's uid or in its cgroup: if none was ever started,
            # there is nothing to kill, and the slot holds only what make made.
            started = slot_dir.started(self.dir)
            lost = worker is None
            ended = launcher.end(self.id, self.dir, record, lost) if started else True
            slot_dir.remove(self.dir, started)
            with self.guard:
                if self.state is not State.ENDED:
                    self.transition(State.ENDED)
        return ended, started

    def stop(self) -> Worker | None:
        """Let go of its worker (the acceptor is stopping; the slot stays): the worker, to stop."""
        with self.guard:
            worker, self.worker = self.worker, None
        return worker
