"""The acceptor's series, from what its last heartbeat measured (docs/metrics.md)."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry

from radium.acceptor.devices import CpuBackend
from radium.acceptor.metrics import AcceptorCollector
from radium.acceptor.nvidia import NvmlBackend
from radium.acceptor.slots import Slots
from radium.proto import pool_pb2 as pb
from tests.acceptor.fake_nvml import FakeGpu, FakeNvml


def test_per_lease_series_and_cpu_devices_follow_the_leases(tmp_path: Path) -> None:
    slots = Slots(str(tmp_path))  # no backend: records only, no worker
    registry = CollectorRegistry()
    registry.register(AcceptorCollector(slots, CpuBackend(3, 1024)))
    value = registry.get_sample_value
    slots.prepare(pb.Lease(id="L1", device_ids=["cpu0", "cpu1"], fraction=1.0, holder="n/c"))
    slots.reported = [
        pb.LeaseUsage(
            lease_id="L1",
            cpu_percent=150.0,
            rss_bytes=200 << 20,
            calls=7,
            bytes_in=10,
            bytes_out=20,
            busy_seconds=0.5,
            errors=1,
        )
    ]
    assert value("radium_acceptor_leases") == 1
    lease = {"lease": "L1"}
    assert value("radium_acceptor_worker_calls_total", lease) == 7
    assert value("radium_acceptor_worker_received_bytes_total", lease) == 10
    assert value("radium_acceptor_worker_sent_bytes_total", lease) == 20
    assert value("radium_acceptor_worker_busy_seconds_total", lease) == 0.5
    assert value("radium_acceptor_worker_errors_total", lease) == 1
    assert value("radium_acceptor_worker_cpu_ratio", lease) == 1.5
    # A CPU device is one core's worth: the worker's 1.5 cores spread over its two devices.
    assert value("radium_acceptor_device_utilization_ratio", {"device": "cpu0"}) == 0.75
    assert value("radium_acceptor_device_memory_used_bytes", {"device": "cpu1"}) == 100 << 20
    assert value("radium_acceptor_device_utilization_ratio", {"device": "cpu2"}) == 0.0
    assert value("radium_acceptor_device_memory_bytes", {"device": "cpu2"}) == 1024 << 20
    slots.teardown("L1")
    slots.reported = []
    assert value("radium_acceptor_worker_calls_total", lease) is None  # gone with the lease
    assert value("radium_acceptor_device_utilization_ratio", {"device": "cpu0"}) == 0.0


def test_nvml_devices_report_what_nvml_measures(tmp_path: Path) -> None:
    nvml = FakeNvml(FakeGpu("GPU-0", 0, total=24 << 30), FakeGpu("GPU-1", 1, busy=50, used=3 << 30))
    registry = CollectorRegistry()
    registry.register(AcceptorCollector(Slots(str(tmp_path)), NvmlBackend(nvml)))
    value = registry.get_sample_value
    assert value("radium_acceptor_device_utilization_ratio", {"device": "1"}) == 0.5
    assert value("radium_acceptor_device_memory_used_bytes", {"device": "1"}) == 3 << 30
    assert value("radium_acceptor_device_utilization_ratio", {"device": "0"}) == 0.0
    assert value("radium_acceptor_device_memory_bytes", {"device": "0"}) == 24 << 30
