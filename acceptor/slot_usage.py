"""What the workers of this acceptor's slots use, for the pool's heartbeats: each worker's
process tree measured here (:mod:`radium.acceptor.usage`), with the data-plane counters the
worker answers (docs/data-plane.md)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from radium.acceptor import usage
from radium.acceptor.devices import GpuUse
from radium.acceptor.launcher import worker_pid
from radium.acceptor.lease_slot import LeaseSlot
from radium.acceptor.usage import Meter
from radium.proto import pool_pb2 as pb
from radium_interposer.control import Counters

__all__ = ["SlotMeter"]


class SlotMeter:
    """Measures the workers of the slots under ``root``. ``gpu`` answers host pid -> GPU use
    (None: no GPU figures); ``slot_of`` finds a lease's slot (None: it has none)."""

    def __init__(
        self,
        root: Path,
        gpu: Callable[[], Mapping[int, GpuUse] | None],
        slot_of: Callable[[str], LeaseSlot | None],
    ) -> None:
        self.root = root
        #: Kept between heartbeats: psutil measures CPU between two calls on one process.
        self.meter = Meter(gpu)
        self.slot_of = slot_of

    def report(self, leases: Iterable[str]) -> list[pb.LeaseUsage]:
        """What each lease's worker uses (zeros for a lease without one), and the counters it
        answered since the last call."""
        pids = {i: worker_pid(self.root / i) for i in leases}
        return usage.report(self.meter.measure_all(pids), self.counted)

    def counted(self, lease_id: str) -> Counters | None:
        """The counters the lease's worker answers now, or last answered."""
        known = self.slot_of(lease_id)
        if known is None:
            return None
        worker = known.live_worker()
        counters = worker.counters() if worker is not None else None
        if counters is not None:
            known.counted = counters
        return known.counted
