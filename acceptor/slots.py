"""Per-lease slots: the lease's record, a private directory and one confined worker per lease.

Layout under ``<state_dir>/slots`` (0700, root; no worker ever sees it)::

    <lease>/lease.json   the lease, its data-plane credential and its worker uid (0600)
    <lease>/worker.pid   the worker's host pid (bubblewrap's, or the container's init)
    <lease>/notice       the preemption notice, once the pool preempted the lease
    <lease>/started      made before the lease's first worker starts
    <lease>/home/        the worker's only writable directory, owned by the lease's uid (0711)
    <lease>/control/     container mode only: the socket the worker connects back to

How a worker is started and ended is :mod:`radium.acceptor.launcher`'s. A worker is started
with the lease's device pinning, under its own uid from the configured range, locked host-wide
while the slot lives (:mod:`radium.acceptor.uids`: another acceptor of the host never gets it),
and killed on revoke with every process of the lease's own cgroups (or its container): never by
uid.
A grant is kept in memory: a lease's slot is made, and its process-mode worker started, on its
first data-plane connection, so a lease that never calls (or a pool churning through thousands a
second) costs no directory and no sandbox; the first call pays the start once
(``benchmarks/sandbox.py``). A container-mode worker's slot is made and its worker started on
grant, its engine's seconds hidden behind the holder's own start. A slot outlives a restart of
the acceptor; the grants it keeps in memory come back from the pool when it registers again.
Authenticated data-plane connections are handed to the worker over its control socket
(``SCM_RIGHTS``); a crashed worker is replaced on the next one.

Threads: grants and revocations are taken on the acceptor's loop, slot changes run in its
threads, data-plane threads hand connections over (making the slot if need be). ``lock`` guards
``granted``, ``workers``, ``starting`` and uid allocation and is never held while a worker starts
or stops; ``starting`` holds one lock per lease, which serialises making its slot and starting,
replacing and stopping its worker. Records on disk are written whole.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import re
import shutil
import socket
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from radium.acceptor.container_worker import ContainerWorker
from radium.acceptor.engines import Engine
from radium.acceptor.launcher import Launcher, Worker, worker_pid
from radium.acceptor.limits import Cgroups
from radium.acceptor.record import SlotRecord
from radium.acceptor.sandbox import Sandbox
from radium.acceptor.slot_uids import WorkerUids
from radium.acceptor.uids import UidLocks
from radium.acceptor.usage import Meter
from radium.errors import LeaseNotFoundError
from radium.pool.model import preemption_notice
from radium.proto import pool_pb2 as pb
from radium_interposer.control import Counters

if TYPE_CHECKING:
    from radium.acceptor.devices import Backend
    from radium.acceptor.gpu_sharing import Sharing

log = logging.getLogger(__name__)
NOTICE = "notice"
#: Made before a lease's first worker starts.
STARTED = "started"
_LEASE_ID = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


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
        self.workers: dict[str, Worker] = {}  # guarded by lock
        #: lease id -> its worker uid, for every slot (guarded by lock): a grant picks a free
        #: uid without reading every record, which under churn cost more than the grant.
        self.uids = {r.id: r.uid for r in map(self.record, self._on_disk()) if r is not None}
        self.uid_locks: UidLocks | None = None
        if sandbox is not None:
            config = sandbox.config
            self.uid_locks = UidLocks(config.uid_lock_dir, config.uid_min, config.uid_max)
        self.worker_uids = WorkerUids(self.uid_locks, sharing)
        if self.uid_locks is not None:
            for lease_id, uid in list(self.uids.items()):  # after a restart: lock them again
                record = self.record(lease_id)
                kept = self.worker_uids.keep(uid, lease_id, self._dir(lease_id) / "home", record)
                if kept != uid and record is not None:
                    dataclasses.replace(record, uid=kept).save(self._dir(lease_id) / "lease.json")
                    self.uids[lease_id] = kept
        self.starting: dict[str, threading.Lock] = {}  # guarded by lock
        #: lease id -> the lease, for every lease the pool granted here and has not revoked
        #: (guarded by lock); its slot on disk is made when it is first needed.
        self.granted: dict[str, pb.Lease] = {}
        #: Notified (under lock) on a grant: a connection may arrive before it.
        self.granting = threading.Condition(self.lock)
        self.meter = Meter(backend.processes if backend is not None else lambda: None)
        #: lease id -> its workers' lines in the log (a tenant's crash loop shares one budget)
        self.budgets = self.launcher.budgets
        #: lease id -> the counters its worker last answered (heartbeat thread; see usage)
        self.counted: dict[str, Counters] = {}
        #: what the last heartbeat reported, for scrapes (which must not ask workers again)
        self.reported: list[pb.LeaseUsage] = []

    def _dir(self, lease_id: str) -> Path:
        if not _LEASE_ID.match(lease_id):
            raise ValueError(f"refusing lease id {lease_id!r}")
        return self.root / lease_id

    def active(self) -> list[str]:
        """The leases this acceptor serves: granted, or with a slot on disk."""
        with self.lock:
            granted = set(self.granted)
        return sorted(granted.union(self._on_disk()))

    def _on_disk(self) -> list[str]:
        return [p.name for p in self.root.iterdir() if p.is_dir()]

    def record(self, lease_id: str) -> SlotRecord | None:
        return SlotRecord.load(self._dir(lease_id) / "lease.json")

    def grant(self, lease: pb.Lease) -> bool:
        """Take the pool's grant; True when its slot is to be made now (:meth:`make`): its
        worker may be a container, whose engine's seconds hide behind the holder's own start.
        Otherwise the slot waits for the lease's first connection: a pool that churns through
        thousands of leases a second costs this acceptor a dict entry each, not a directory."""
        self._dir(lease.id)  # refuses an id that is no name
        with self.lock:
            self.granted[lease.id] = lease
            self.granting.notify_all()
        return self.launcher.starts_at_grant(lease.image, lease.worker)

    def revoke(self, lease_id: str) -> bool:
        """The pool revoked the lease; True when that is all (no slot was made for it),
        False when its :meth:`teardown` must follow."""
        with self.lock:
            self.granted.pop(lease_id, None)
            return lease_id not in self.uids

    def prepare(self, lease: pb.Lease) -> None:
        """Grant the lease and make its slot now."""
        self.grant(lease)
        self.make(lease.id)

    def make(self, lease_id: str) -> None:
        """Make the granted lease's slot, and start its worker if it is to be a container;
        nothing if the lease has ended meanwhile."""
        record = self._slot(lease_id)
        if record is not None and self.launcher.starts_at_grant(record.image, record.worker):
            self._worker(record)

    def _slot(self, lease_id: str) -> SlotRecord | None:
        """The lease's slot record, its slot made now if it has none; None for a lease that
        is not (or no longer) granted here."""
        slot = self._dir(lease_id)
        with self._starting(lease_id):
            record = self.record(lease_id)
            if record is not None:
                return record
            with self.lock:
                lease = self.granted.get(lease_id)
            if lease is None:
                return None
            # Outside the lock: taking a uid looks at every process of the host.
            uid = self.worker_uids.take(lease)
            with self.lock:
                if lease_id in self.granted:
                    record = SlotRecord.of(lease, uid)
                    self.uids[lease_id] = uid  # taken: no other slot gets it
            if record is None:  # revoked meanwhile
                self.worker_uids.release(uid)
                return None
            slot.mkdir(mode=0o700, exist_ok=True)
            home = slot / "home"
            home.mkdir(exist_ok=True)
            if record.uid:
                os.chown(home, record.uid, record.uid)
            # o+x: the sandbox enters it before it drops to the uid (as a root without
            # CAP_DAC_OVERRIDE); nobody can list it, and only this lease's sandbox can reach it.
            home.chmod(0o711)
            record.save(slot / "lease.json")  # last: a slot with a record is whole
        log.debug(
            "slot made for lease %s (devices %s, holder %s, uid %d)",
            lease_id,
            list(record.devices),
            record.holder,
            record.uid,
        )
        return record

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
            while (lease := self.granted.get(lease_id)) is None and time.monotonic() < deadline:
                self.granting.wait(deadline - time.monotonic())
        if lease is not None:
            return lease.credential or None
        # A slot kept from before this acceptor restarted, while the pool is out of reach.
        record = self.record(lease_id)
        return record.credential if record and record.credential else None

    def _worker(self, record: SlotRecord) -> Worker:
        """The lease's live worker, started now if it has none (or a dead one).

        Idempotent: the lease's first connection may race its grant here (the holder learns of
        the lease as the acceptor does), and both must find the same worker.
        """
        live = self._live(record.id)
        if live is not None:
            return live
        with self._starting(record.id):
            live = self._live(record.id)
            if live is not None:
                return live
            if self.record(record.id) is None:  # torn down while this waited
                raise LeaseNotFoundError(f"lease {record.id} has ended")
            with self.lock:
                dead = self.workers.pop(record.id, None)
            if dead is not None:
                log.warning("lease %s: worker died; starting a new one", record.id)
                dead.stop()
            (self._dir(record.id) / STARTED).touch()
            worker, applied = self.launcher.start(record, self._dir(record.id))
            with self.lock:
                self.workers[record.id] = worker
            with contextlib.suppress(FileNotFoundError):  # a replacement is told again
                worker.notify((self._dir(record.id) / NOTICE).read_text())
        log.info(
            "lease %s: %s worker %s on %s as uid %d (%s)",
            record.id,
            worker.mode,
            worker.image if isinstance(worker, ContainerWorker) else worker.pid,
            list(record.devices),
            record.uid,
            ", ".join(applied) or ("no host limits" if self.launcher.sandbox else "unconfined"),
        )
        return worker

    def _starting(self, lease_id: str) -> threading.Lock:
        with self.lock:
            return self.starting.setdefault(lease_id, threading.Lock())

    def _live(self, lease_id: str) -> Worker | None:
        with self.lock:
            worker = self.workers.get(lease_id)
        return worker if worker is not None and worker.alive() else None

    def worker(self, lease_id: str) -> Worker:
        """The lease's live worker, started now if it has none or a dead one."""
        worker = self._live(lease_id)
        if worker is None:
            record = self._slot(lease_id)
            if record is None:
                raise LeaseNotFoundError(f"lease {lease_id} has no slot on this acceptor")
            worker = self._worker(record)
        return worker

    def hand_over(self, lease_id: str, connection: socket.socket, timeout: float) -> None:
        """Give an authenticated connection to the lease's worker (started if need be, within
        its start timeout); ``socket.timeout`` when the worker does not take it within
        ``timeout`` seconds (it stopped reading its control socket)."""
        self.worker(lease_id).hand_over(connection, timeout)

    def preempt(self, lease: pb.Lease) -> None:
        """Tell the lease's worker it is preempted (it tells its clients); the pool revokes
        the lease when the grace period is over."""
        slot = self._dir(lease.id)
        text = preemption_notice(lease.id, lease.queue, lease.preempted_for, lease.expires_at)
        if self._slot(lease.id) is None:  # ended meanwhile
            return
        with self._starting(lease.id):
            if not slot.is_dir():
                return
            (slot / NOTICE).write_text(text)
            worker = self._live(lease.id)
        if worker is not None:
            worker.notify(text)
        log.info("%s", text)

    def teardown(self, lease_id: str) -> None:
        slot = self._dir(lease_id)
        with self._starting(lease_id):
            record = self.record(lease_id)
            with self.lock:
                worker = self.workers.pop(lease_id, None)
            if worker is not None:
                worker.stop()
            # Only a worker runs as the lease's uid or in its cgroup: if none was ever started
            # (the mark is made before one starts and outlives a restart of ours; a slot of an
            # acceptor before the mark has a worker.pid), there is nothing to kill, and the
            # slot holds only what prepare made.
            started = (slot / STARTED).exists() or (slot / "worker.pid").exists()
            lost = worker is None
            ended = self.launcher.end(lease_id, slot, record, lost) if started else True
            _remove_slot(slot, started)
            with self.lock:
                self.starting.pop(lease_id, None)
                uid = self.uids.pop(lease_id, 0)
                self.granted.pop(lease_id, None)
            if ended:  # nothing of the lease is left to meet the uid's next lease
                self.worker_uids.release(uid)
            else:
                why = "processes of its cgroups outlived it"
                log.error("lease %s: %s; its uid %d stays held", lease_id, why, uid)
            self.counted.pop(lease_id, None)
        log.log(logging.INFO if started else logging.DEBUG, "slot of lease %s torn down", lease_id)

    def close(self) -> None:
        """Stop every worker (the acceptor is shutting down; slots stay for its restart)."""
        with self.lock:
            workers, self.workers = list(self.workers.values()), {}
        for worker in workers:
            worker.stop()

    def reconcile(self, leases: list[pb.Lease]) -> None:
        """After (re)registering: exactly the pool's active leases have slots."""
        wanted = {lease.id: lease for lease in leases}
        with self.lock:
            dropped = set(self.granted) - set(wanted)
            for lease_id in dropped:
                del self.granted[lease_id]
        if dropped:  # a holder of one is refused at the data plane: say why here
            log.info("the pool no longer lists leases %s: dropped", ", ".join(sorted(dropped)))
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
        report = []
        leases = self.active()  # a lease without a slot has no worker: zeros
        measured = self.meter.measure_all({i: worker_pid(self.root / i) for i in leases})
        for lease_id in leases:
            used = measured[lease_id]
            worker = self._live(lease_id)
            counters = worker.counters() if worker is not None else None
            if counters is not None:
                self.counted[lease_id] = counters
            report.append(
                pb.LeaseUsage(
                    lease_id=lease_id,
                    cpu_percent=used.cpu_percent,
                    rss_bytes=used.rss_bytes,
                    gpu_memory_bytes=used.gpu_memory_bytes,
                    gpu_sm_percent=used.gpu_sm_percent,
                    **self.counted.get(lease_id, {}),  # type: ignore[arg-type]
                )
            )
        self.reported = report
        return report


def _remove_slot(slot: Path, started: bool) -> None:
    """Remove the slot: what prepare made takes a few unlinks (a churning pool sends thousands
    a second), anything a worker may have left takes a full walk."""
    if not started:
        with contextlib.suppress(OSError):  # not just that (or gone already): walk it
            for name in ("lease.json", NOTICE):
                (slot / name).unlink(missing_ok=True)
            (slot / "home").rmdir()
            slot.rmdir()
            return
    shutil.rmtree(slot, ignore_errors=True)
