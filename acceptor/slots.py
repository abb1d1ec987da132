"""Per-lease worker slots: a private directory per lease, prepared on grant, removed on revoke.

A slot is where the lease's worker process (the data-plane issue) will run: its lease record
(with the credential, mode 0600) and, once a worker runs, its pid, from which usage is read.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
from pathlib import Path

import psutil

from radium.proto import pool_pb2 as pb

log = logging.getLogger(__name__)
_LEASE_ID = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


class Slots:
    def __init__(self, state_dir: str) -> None:
        self.root = Path(state_dir) / "slots"
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
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
        }
        path = slot / "lease.json"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(record, f)
        log.info(
            "slot ready for lease %s (devices %s, holder %s)",
            lease.id,
            list(lease.device_ids),
            lease.holder,
        )

    def teardown(self, lease_id: str) -> None:
        slot = self._dir(lease_id)
        pid = self._worker(slot)
        if pid is not None:
            with contextlib.suppress(psutil.Error):
                psutil.Process(pid).kill()
        shutil.rmtree(slot, ignore_errors=True)
        log.info("slot of lease %s torn down", lease_id)

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
