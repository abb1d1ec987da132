"""The acceptor's Prometheus series (docs/metrics.md): per lease, what its worker uses (host
and GPU) and serves; per device, its health, utilisation and memory.

Everything is read at scrape time from what the last heartbeat measured (``Slots.reported``):
a scrape never asks a worker anything (the heartbeat thread owns that conversation) and costs
the data plane nothing. Per-lease series carry the lease id and vanish with the slot.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from radium.acceptor.slots import Slots
from radium.proto import pool_pb2 as pb

if TYPE_CHECKING:
    from radium.acceptor.devices import Backend

__all__ = ["AcceptorCollector"]

#: (series, help, LeaseUsage field, its scale to the series' unit, counter)
_PER_LEASE = (
    ("cpu_ratio", "CPU the worker and its children use, in cores", "cpu_percent", 0.01, False),
    ("resident_memory_bytes", "Resident memory of the worker and children", "rss_bytes", 1, False),
    ("calls", "Data-plane calls the worker served", "calls", 1, True),
    ("received_bytes", "Buffer bytes of the calls the worker received", "bytes_in", 1, True),
    ("sent_bytes", "Buffer bytes of the answers the worker sent", "bytes_out", 1, True),
    ("busy_seconds", "Time the worker spent serving calls", "busy_seconds", 1, True),
    ("errors", "Calls the worker answered with an error", "errors", 1, True),
    ("gpu_memory_bytes", "Device memory the worker's processes hold (NVML)", "gpu_memory_bytes",
     1, False),
    ("gpu_sm_ratio", "SM utilisation of the worker's processes, in GPUs (NVML; 0 under MPS)",
     "gpu_sm_percent", 0.01, False),
)  # fmt: skip


class AcceptorCollector:
    """The acceptor's series, from ``slots``' last heartbeat and ``backend``'s devices."""

    def __init__(self, slots: Slots, backend: Backend) -> None:
        self.slots, self.backend = slots, backend

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        reported = list(self.slots.reported)
        yield GaugeMetricFamily(
            "radium_acceptor_leases", "Leases this acceptor serves", len(reported)
        )
        for name, text, field, scale, counter in _PER_LEASE:
            family = (CounterMetricFamily if counter else GaugeMetricFamily)(
                f"radium_acceptor_worker_{name}", text, labels=["lease"]
            )
            for usage in reported:
                family.add_metric([usage.lease_id], getattr(usage, field) * scale)
            yield family
        yield from self._devices(reported)

    def _devices(self, reported: list[pb.LeaseUsage]) -> Iterator[Metric]:
        utilisation = GaugeMetricFamily(
            "radium_acceptor_device_utilization_ratio",
            "Share of the device busy (NVML; CPU backend: its leases' workers' CPU)",
            labels=["device"],
        )
        used = GaugeMetricFamily(
            "radium_acceptor_device_memory_used_bytes",
            "Device memory in use (NVML; CPU backend: its leases' workers' resident memory)",
            labels=["device"],
        )
        size = GaugeMetricFamily(
            "radium_acceptor_device_memory_bytes", "Device memory", labels=["device"]
        )
        devices = self.backend.devices()
        healthy = GaugeMetricFamily(
            "radium_acceptor_device_healthy",
            "1 when the device takes leases; 0 when its health checks failed (not registered)",
            labels=["device"],
        )
        for device in devices:
            healthy.add_metric([device.id], 1)
        for gpu in self.backend.gpus():
            if gpu.health != "ok":
                healthy.add_metric([gpu.id], 0)
        yield healthy
        measured = self.backend.utilization()
        if measured is None:  # spread each lease's worker over the devices it holds
            measured = {d.id: (0.0, 0) for d in devices}
            for usage in reported:
                record = self.slots.record(usage.lease_id)
                held = [d for d in (record.devices if record else ()) if d in measured]
                for device_id in held:
                    busy, memory = measured[device_id]
                    measured[device_id] = (
                        busy + usage.cpu_percent / 100 / len(held),
                        memory + usage.rss_bytes // len(held),
                    )
        for device in devices:
            busy, memory = measured.get(device.id, (0.0, 0))
            utilisation.add_metric([device.id], busy)
            used.add_metric([device.id], memory)
            size.add_metric([device.id], device.memory_mib << 20)
        yield from (utilisation, used, size)
