"""Per-lease worker slots: a private directory and a worker process per lease.

A slot holds the lease record (with the credential, mode 0600) and is the working directory of
the lease's worker: one process per lease, never shared between tenants, started on grant with
the lease's device pinning and killed on revoke. Authenticated data-plane connections are handed
to it over its control socket (``SCM_RIGHTS``); a crashed worker is replaced on the next one.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import socket
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

import psutil

from radium.acceptor.engines import Docker, Engine
from radium.acceptor.limits import Cgroups, Share
from radium.acceptor.workers import ContainerWorker, ProcessWorker
from radium.errors import LeaseNotFoundError, RadiumError
from radium.proto import pool_pb2 as pb

log = logging.getLogger(__name__)
_LEASE_ID = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


if TYPE_CHECKING:
    from radium.acceptor.devices import Backend

Worker = Union[ProcessWorker, ContainerWorker]


class Slots:
    def __init__(
        self,
        state_dir: str,
        backend: Backend | None = None,
        limits: Cgroups | None = None,
        engine: Engine | None = None,
    ) -> None:
        """Without a backend, slots hold lease records only and start no worker. With a docker
        engine, a lease whose image it holds gets a container-mode worker."""
        self.root = Path(state_dir) / "slots"
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.backend = backend
        self.limits = limits
        self.engine = engine
        self.workers: dict[str, Worker] = {}
        self.lock = threading.Lock()
        # psutil measures CPU between two calls on the same Process object: keep them.
        self._processes: dict[int, psutil.Process] = {}

    def _dir(self, lease_id: str) -> Path:
        if not _LEASE_ID.match(lease_id):
            raise ValueError(f"refusing lease id {lease_id!r}")
        return self.root / lease_id

    def active(self) -> list[str]:
        return sorted(p.name for p in self.root.iterdir() if p.is_dir())

    def prepare(self, lease: pb.Lease) -> None:
        slot = self._dir(lease.id)
        slot.mkdir(mode=0o700, exist_ok=True)
        record = {
            "id": lease.id,
            "devices": list(lease.device_ids),
            "fraction": lease.fraction,
            "memory_mib": lease.memory_mib,
            "holder": lease.holder,
            "credential": lease.credential,
            "image": lease.image,
            "worker": lease.worker,
        }
        path = slot / "lease.json"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(record, f)
        if self.backend is not None:
            self._start_worker(lease.id, record)
        log.info(
            "slot ready for lease %s (devices %s, holder %s)",
            lease.id,
            list(lease.device_ids),
            lease.holder,
        )

    def _record(self, lease_id: str) -> dict[str, Any] | None:
        try:
            record = json.loads((self._dir(lease_id) / "lease.json").read_text())
        except (OSError, ValueError):
            return None
        return record if isinstance(record, dict) else None

    def credential(self, lease_id: str) -> str | None:
        """The lease's data-plane credential, None for a lease this acceptor does not serve."""
        try:
            record = self._record(lease_id)
        except ValueError:
            return None
        value = record.get("credential") if record else None
        return value if isinstance(value, str) and value else None

    def _container_image(self, record: dict[str, Any]) -> str:
        """The image to run the worker in, or "" for process mode (and why, logged)."""
        image, mode = str(record.get("image") or ""), str(record.get("worker") or "")
        if not image or mode == "process":
            return ""
        if not isinstance(self.engine, Docker):
            reason = "this acceptor has no docker engine"
        else:
            try:
                held = self.engine.digest(image) is not None
            except RadiumError as exc:
                held, reason = False, exc.message
            else:
                reason = "" if held else f"{image} is not pulled here (radium images add)"
            if held:
                return image
        log.log(
            logging.WARNING if mode == "container" else logging.INFO,
            "lease %s: process-mode worker: %s",
            record.get("id"),
            reason,
        )
        return ""

    def _start_worker(self, lease_id: str, record: dict[str, Any]) -> Worker:
        assert self.backend is not None
        devices = [str(d) for d in record.get("devices") or []]
        pinning = {**self.backend.visible_devices_env(devices), "RADIUM_LEASE_ID": lease_id}
        share = self.backend.share(
            devices, float(record.get("fraction") or 0), int(record.get("memory_mib") or 0)
        )
        image = self._container_image(record)
        slot = self._dir(lease_id)
        with self.lock:
            old = self.workers.pop(lease_id, None)
            if old is not None:
                old.stop()
            worker: Worker
            if image and isinstance(self.engine, Docker):
                worker = ContainerWorker(lease_id, slot, pinning, self.engine, image, share)
                limits = [f"docker limits {share}"] if share != Share() else []
            else:
                worker = ProcessWorker(lease_id, slot, {**os.environ, **pinning})
                limits = []
            self.workers[lease_id] = worker
        if self.limits is not None and isinstance(worker, ProcessWorker):
            limits = self.limits.apply(lease_id, worker.pid, share)
        log.info(
            "lease %s: %s worker %s on %s (%s)",
            lease_id,
            worker.mode,
            image or worker.pid,
            devices,
            ", ".join(limits) or "no host limits",
        )
        return worker

    def hand_over(self, lease_id: str, connection: socket.socket) -> None:
        """Give an authenticated connection to the lease's worker (restarted if it died)."""
        worker = self.workers.get(lease_id)
        if worker is None or not worker.alive():
            record = self._record(lease_id)
            if record is None:
                raise LeaseNotFoundError(f"lease {lease_id} has no slot on this acceptor")
            if worker is not None:
                log.warning("lease %s: worker died; starting a new one", lease_id)
            worker = self._start_worker(lease_id, record)
        worker.hand_over(connection)

    def teardown(self, lease_id: str) -> None:
        slot = self._dir(lease_id)
        with self.lock:
            worker = self.workers.pop(lease_id, None)
        if worker is not None:
            worker.stop()
        if self.limits is not None:
            self.limits.remove(lease_id)
        pid = self._worker(slot)
        if pid is not None:
            with contextlib.suppress(psutil.Error):
                psutil.Process(pid).kill()
        shutil.rmtree(slot, ignore_errors=True)
        log.info("slot of lease %s torn down", lease_id)

    def close(self) -> None:
        """Stop every worker (the acceptor is shutting down; slots stay for its restart)."""
        with self.lock:
            workers, self.workers = list(self.workers.values()), {}
        for worker in workers:
            worker.stop()

    def reconcile(self, leases: list[pb.Lease]) -> None:
        """After (re)registering: exactly the pool's active leases have slots."""
        wanted = {lease.id: lease for lease in leases}
        for lease_id in self.active():
            if lease_id not in wanted:
                self.teardown(lease_id)
        for lease in leases:
            if not self._dir(lease.id).exists():
                self.prepare(lease)

    @staticmethod
    def _worker(slot: Path) -> int | None:
        try:
            return int((slot / "worker.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def usage(self) -> list[pb.LeaseUsage]:
        """CPU and RSS of each slot's worker process (and its children), through psutil."""
        report = []
        for lease_id in self.active():
            pid = self._worker(self.root / lease_id)
            cpu, rss = 0.0, 0
            if pid is not None:
                try:
                    process = self._processes.get(pid) or self._processes.setdefault(
                        pid, psutil.Process(pid)
                    )
                    for p in [process, *process.children(recursive=True)]:
                        with p.oneshot():
                            cpu += p.cpu_percent(interval=None)
                            rss += p.memory_info().rss
                except psutil.Error:
                    self._processes.pop(pid, None)
            report.append(pb.LeaseUsage(lease_id=lease_id, cpu_percent=cpu, rss_bytes=rss))
        return report
