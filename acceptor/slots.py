"""The leases this acceptor serves: a table of :class:`~radium.acceptor.lease_slot.LeaseSlot`
(each lease's life, a state machine) and what the pool's word does to it.

A grant is kept in memory: a lease's slot (:mod:`radium.acceptor.slot_dir`) is made, and its
process-mode worker started (:mod:`radium.acceptor.launcher`), on its first data-plane
connection, so a lease that never calls (or a pool churning through thousands a second) costs no
directory and no sandbox; the first call pays the start once (``benchmarks/sandbox.py``). A
container-mode worker's slot is made and its worker started on grant, its engine's seconds
hidden behind the holder's own start. Each worker runs under a uid of its own, locked host-wide
while the slot lives (:mod:`radium.acceptor.uids`), and is killed with every process of the
lease's cgroups (or its container), never by uid. A slot outlives a restart of the acceptor
(:mod:`radium.acceptor.slot_restore`); the grants come back from the pool when it registers
again. Connections are handed to the worker over its control socket (``SCM_RIGHTS``); a crashed
worker is replaced on the next one.

Threads: grants and revocations are taken on the acceptor's loop, slot changes run in its
threads, data-plane threads hand connections over (making the slot if need be). ``lock`` guards
the table, each slot's fields and uid allocation, and is never held while a worker starts or
stops; each slot's own lock serialises its moves. Records on disk are written whole.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from radium.acceptor import slot_dir
from radium.acceptor.engines import Engine
from radium.acceptor.launcher import Launcher, Worker
from radium.acceptor.lease_slot import LeaseSlot, State
from radium.acceptor.limits import Cgroups
from radium.acceptor.record import SlotRecord
from radium.acceptor.sandbox import Sandbox
from radium.acceptor.slot_restore import restore
from radium.acceptor.slot_uids import WorkerUids
from radium.acceptor.slot_usage import SlotMeter
from radium.acceptor.uids import UidLocks
from radium.errors import LeaseNotFoundError
from radium.pool.model import preemption_notice
from radium.proto import pool_pb2 as pb

if TYPE_CHECKING:
    from radium.acceptor.devices import Backend
    from radium.acceptor.gpu_sharing import Sharing

__all__ = ["Slots"]

log = logging.getLogger(__name__)


class Slots:
    """The leases this acceptor serves, each with its directory and worker.

    Without a backend, slots hold lease records only and start no worker. Without a sandbox,
    workers run unconfined as root (tests only: ``acceptor.sandbox.enabled = false``). With a
    docker engine, a lease whose image it holds gets a container-mode worker.
    """

    def __init__(
        self,
        state_dir: str,
        backend: Backend | None = None,
        *,
        sandbox: Sandbox | None = None,
        limits: Cgroups | None = None,
        engine: Engine | None = None,
        sharing: Sharing | None = None,
    ) -> None:
        self.root = Path(state_dir) / "slots"
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        for directory in (self.root.parent, self.root):
            directory.chmod(0o700)
        #: Starts and ends the workers (their mode, confinement and limits).
        self.launcher = Launcher(backend, sandbox, limits, engine)
        #: How fractional leases share a GPU: their uid group, MPS environment and refusal.
        self.sharing = self.launcher.sharing = sharing
        self.lock = threading.Lock()
        self.uid_locks: UidLocks | None = None
        if sandbox is not None:
            config = sandbox.config
            self.uid_locks = UidLocks(config.uid_lock_dir, config.uid_min, config.uid_max)
        self.worker_uids = WorkerUids(self.uid_locks, sharing)
        #: lease id -> its slot, for every lease granted here or with a slot on disk (guarded
        #: by lock): a grant picks a free uid without reading every record, which under churn
        #: cost more than the grant.
        self.table = restore(self.root, self._on_disk(), self.lock, self.worker_uids)
        #: Notified (under lock) on a grant: a connection may arrive before it.
        self.granting = threading.Condition(self.lock)
        gpu = backend.processes if backend is not None else lambda: None
        self.meter = SlotMeter(self.root, gpu, self._slot_of)
        #: lease id -> its workers' lines in the log (a tenant's crash loop shares one budget)
        self.budgets = self.launcher.budgets
        #: what the last heartbeat reported, for scrapes (which must not ask workers again)
        self.reported: list[pb.LeaseUsage] = []

    @property
    def workers(self) -> dict[str, Worker]:
        """lease id -> its worker (a copy), for every lease that has one."""
        with self.lock:
            return {i: s.worker for i, s in self.table.items() if s.worker is not None}

    @property
    def uids(self) -> dict[str, int]:
        """lease id -> its worker's uid (a copy), for every lease that has taken one."""
        with self.lock:
            return {i: s.uid for i, s in self.table.items() if s.uid is not None}

    def _dir(self, lease_id: str) -> Path:
        return slot_dir.path(self.root, lease_id)

    def _slot_of(self, lease_id: str) -> LeaseSlot | None:
        with self.lock:
            return self.table.get(lease_id)

    def active(self) -> list[str]:
        """The leases this acceptor serves: granted, or with a slot on disk."""
        with self.lock:
            known = set(self.table)
        return sorted(known.union(self._on_disk()))

    def _on_disk(self) -> list[str]:
        return [p.name for p in self.root.iterdir() if p.is_dir()]

    def record(self, lease_id: str) -> SlotRecord | None:
        return SlotRecord.load(self._dir(lease_id) / "lease.json")

    def grant(self, lease: pb.Lease) -> bool:
        """Take the pool's grant; True when its slot is to be made now (:meth:`make`): its
        worker may be a container, whose engine's seconds hide behind the holder's own start.
        Otherwise the slot waits for the lease's first connection: a pool that churns through
        thousands of leases a second costs this acceptor a table entry each, not a directory."""
        slot = self._dir(lease.id)  # refuses an id that is no name
        with self.lock:
            known = self.table.get(lease.id)
            if known is None:
                self.table[lease.id] = LeaseSlot(lease.id, slot, self.lock, lease=lease)
            else:
                known.lease = lease
            self.granting.notify_all()
        return self.launcher.starts_at_grant(lease.image, lease.worker)

    def revoke(self, lease_id: str) -> bool:
        """The pool revoked the lease; True when that is all (no slot was made for it),
        False when its :meth:`teardown` must follow."""
        with self.lock:
            known = self.table.get(lease_id)
            if known is None:
                return True
            known.lease = None
            if known.uid is not None:  # its slot is made, or being made
                return False
            known.transition(State.ENDED)
            del self.table[lease_id]
            return True

    def prepare(self, lease: pb.Lease) -> None:
        """Grant the lease and make its slot now."""
        self.grant(lease)
        self.make(lease.id)

    def make(self, lease_id: str) -> None:
        """Make the granted lease's slot, and start its worker if it is to be a container;
        nothing if the lease has ended meanwhile."""
        known = self._made(lease_id)
        record = known.record if known is not None else None
        if (
            known is not None
            and record
            and self.launcher.starts_at_grant(record.image, record.worker)
        ):
            known.start(self.launcher)

    def _made(self, lease_id: str) -> LeaseSlot | None:
        """The lease's slot, made now if it is only granted; None for a lease that is not (or
        no longer) granted or kept here."""
        known = self._slot_of(lease_id)
        if known is None:
            return None
        return known if known.ensure_made(self.worker_uids) else None

    def credential(self, lease_id: str, wait: float = 0.0) -> str | None:
        """The lease's data-plane credential, None for a lease this acceptor does not serve.

        ``wait``: how long to wait for a grant not seen yet (the pool tells the holder and this
        acceptor at once, and the holder may connect first).
        """
        try:
            self._dir(lease_id)
        except ValueError:
            return None
        deadline = time.monotonic() + wait
        with self.lock:
            while (known := self.table.get(lease_id)) is None or known.lease is None:
                if time.monotonic() >= deadline:
                    break
                self.granting.wait(deadline - time.monotonic())
            lease = known.lease if known is not None else None
            record = known.record if known is not None else None
        if lease is not None:
            return lease.credential or None
        # A slot kept from before this acceptor restarted, while the pool is out of reach.
        return record.credential if record and record.credential else None

    def worker(self, lease_id: str) -> Worker:
        """The lease's live worker, started now if it has none or a dead one."""
        known = self._slot_of(lease_id)
        live = known.live_worker() if known is not None else None
        if live is not None:
            return live
        known = self._made(lease_id)
        if known is None:
            raise LeaseNotFoundError(f"lease {lease_id} has no slot on this acceptor")
        return known.start(self.launcher)

    def hand_over(self, lease_id: str, connection: socket.socket, timeout: float) -> None:
        """Give an authenticated connection to the lease's worker (started if need be, within
        its start timeout); ``socket.timeout`` when the worker does not take it within
        ``timeout`` seconds (it stopped reading its control socket)."""
        self.worker(lease_id).hand_over(connection, timeout)

    def preempt(self, lease: pb.Lease) -> None:
        """Tell the lease's worker it is preempted (it tells its clients); the pool revokes
        the lease when the grace period is over."""
        text = preemption_notice(lease.id, lease.queue, lease.preempted_for, lease.expires_at)
        known = self._made(lease.id)
        if known is None:  # ended meanwhile
            return
        known.preempted(text)

    def teardown(self, lease_id: str) -> None:
        slot = self._dir(lease_id)
        # A directory no slot holds (its record never written) is torn down all the same.
        known = self._slot_of(lease_id) or LeaseSlot(lease_id, slot, self.lock, State.MADE)
        ended, started = known.end(self.launcher)
        with self.lock:
            if self.table.get(lease_id) is known:
                del self.table[lease_id]
        uid = known.uid or 0
        if ended:  # nothing of the lease is left to meet the uid's next lease
            self.worker_uids.release(uid)
        else:
            why = "processes of its cgroups outlived it"
            log.error("lease %s: %s; its uid %d stays held", lease_id, why, uid)
        log.log(logging.INFO if started else logging.DEBUG, "slot of lease %s torn down", lease_id)

    def close(self) -> None:
        """Stop every worker (the acceptor is shutting down; slots stay for its restart)."""
        with self.lock:
            slots = list(self.table.values())
        for known in slots:
            worker = known.stop()
            if worker is not None:
                worker.stop()

    def reconcile(self, leases: list[pb.Lease]) -> None:
        """After (re)registering: exactly the pool's active leases have slots."""
        wanted = {lease.id: lease for lease in leases}
        with self.lock:
            dropped = sorted(
                i for i, s in self.table.items() if s.lease is not None and i not in wanted
            )
        for lease_id in dropped:
            self.revoke(lease_id)
        if dropped:  # a holder of one is refused at the data plane: say why here
            log.info("the pool no longer lists leases %s: dropped", ", ".join(dropped))
        for lease_id in self._on_disk():
            if lease_id not in wanted:
                self.teardown(lease_id)
        for lease in leases:
            if self.grant(lease):
                self.make(lease.id)
            if lease.preempted_at:
                self.preempt(lease)

    def usage(self) -> list[pb.LeaseUsage]:
        """What each slot's worker uses: CPU, RSS and GPU figures (with its children) measured
        here, and the data-plane counters it answered since the last call (docs/data-plane.md)."""
        self.reported = self.meter.report(self.active())
        return self.reported
