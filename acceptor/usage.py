"""What a lease's worker uses, for the pool's heartbeats: CPU and RSS via psutil, and GPU
memory and SM utilisation from the vendor's per-process figures (``Backend.processes``), each
over the worker's process tree: bubblewrap's pid and every descendant (fork, subprocess)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import psutil

from radium.acceptor.devices import GpuUse
from radium.errors import RadiumError
from radium.proto import pool_pb2 as pb
from radium_interposer.control import Counters

__all__ = ["Measured", "Meter", "report"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Measured:
    """One lease's worker tree, as one heartbeat measured it."""

    cpu_percent: float = 0.0
    rss_bytes: int = 0
    #: Device memory its processes hold, over all its GPUs.
    gpu_memory_bytes: int = 0
    #: SM utilisation of its processes, in percent of one GPU (0 under MPS: docs/gpus.md).
    gpu_sm_percent: float = 0.0


class Meter:
    """Measures worker process trees; keeps their psutil objects, which measure CPU between two
    calls on the same object. ``gpu`` answers host pid -> GPU use (None: no GPU figures)."""

    def __init__(self, gpu: Callable[[], Mapping[int, GpuUse] | None] = lambda: None) -> None:
        self._processes: dict[int, psutil.Process] = {}
        self.gpu = gpu

    def measure_all(self, workers: Mapping[str, int | None]) -> dict[str, Measured]:
        """Lease id -> what its worker tree uses, for ``workers`` (lease id -> worker pid);
        the vendor's per-process figures are asked for once for all of them."""
        try:
            on_gpus = self.gpu() or {}
        except RadiumError as exc:  # a heartbeat reports what it can
            log.warning("no per-process GPU figures: %s", exc.one_line())
            on_gpus = {}
        measured = {}
        for lease_id, pid in workers.items():
            cpu, rss, pids = self._tree(pid)
            used = [on_gpus[p] for p in pids if p in on_gpus]
            measured[lease_id] = Measured(
                cpu_percent=cpu,
                rss_bytes=rss,
                gpu_memory_bytes=sum(u.memory_bytes for u in used),
                gpu_sm_percent=sum(u.sm_percent for u in used),
            )
        return measured

    def measure(self, pid: int | None) -> tuple[float, int]:
        """(CPU percent, RSS bytes) of ``pid`` and its descendants; zeros when it is gone."""
        cpu, rss, _ = self._tree(pid)
        return cpu, rss

    def _tree(self, pid: int | None) -> tuple[float, int, list[int]]:
        cpu, rss, pids = 0.0, 0, list[int]()
        if pid is None:
            return cpu, rss, pids
        try:
            process = self._processes.get(pid) or self._processes.setdefault(
                pid, psutil.Process(pid)
            )
            tree = [process, *process.children(recursive=True)]
        except psutil.Error:
            self._processes.pop(pid, None)
            return cpu, rss, pids
        for p in tree:
            try:
                with p.oneshot():
                    cpu += p.cpu_percent(interval=None)
                    rss += p.memory_info().rss
            except psutil.Error:
                continue  # it ended since the listing
            pids.append(p.pid)
        return cpu, rss, pids


def report(
    measured: Mapping[str, Measured], counted: Callable[[str], Counters | None]
) -> list[pb.LeaseUsage]:
    """The heartbeat's usage of each lease measured, with the data-plane counters its worker
    answered (``counted``: none for a lease without a worker)."""
    return [
        pb.LeaseUsage(
            lease_id=lease_id,
            cpu_percent=used.cpu_percent,
            rss_bytes=used.rss_bytes,
            gpu_memory_bytes=used.gpu_memory_bytes,
            gpu_sm_percent=used.gpu_sm_percent,
            **(counted(lease_id) or {}),  # type: ignore[arg-type]
        )
        for lease_id, used in measured.items()
    ]
