"""Per-lease GPU accounting: NVML's per-process figures (a stand-in NVML), summed over each
lease's real worker process tree, into the heartbeat and the metrics."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from radium.acceptor.devices import GpuUse
from radium.acceptor.metrics import AcceptorCollector
from radium.acceptor.nvidia import NvmlBackend
from radium.acceptor.slots import Slots
from radium.acceptor.usage import Meter
from radium.errors import DeviceError
from radium.proto import pool_pb2 as pb
from tests.acceptor.fake_nvml import FakeGpu, FakeNvml

GIB = 1 << 30


def test_memory_and_sm_per_process_over_the_gpus() -> None:
    nvml = FakeNvml(
        FakeGpu(
            "GPU-a", 0, compute=[(10, GIB), (11, None)], samples=[(10, 100, 40), (10, 200, 60)]
        ),
        FakeGpu("GPU-b", 1, compute=[(10, 2 * GIB)], samples=[(10, 150, 30)]),
    )
    backend = NvmlBackend(nvml)
    assert backend.processes() == {
        10: GpuUse(memory_bytes=3 * GIB, sm_percent=50 + 30),  # mean per GPU, summed
        11: GpuUse(memory_bytes=0, sm_percent=0.0),  # memory not available (None)
    }
    # The next heartbeat asks for samples since the newest it saw, per GPU: none are new.
    assert backend.processes() == {10: GpuUse(3 * GIB, 0.0), 11: GpuUse(0, 0.0)}
    assert nvml.asked[-2:] == [("utilization", 200), ("utilization", 150)]
    nvml.gpus[0].samples.append((11, 300, 90))
    assert backend.processes()[11] == GpuUse(0, 90.0)


def test_under_mps_clients_count_once_and_sm_is_the_server_s() -> None:
    server, client1, client2 = 900, 1001, 1002
    gpu = FakeGpu(
        "GPU-a",
        0,
        compute=[(server, 500 << 20), (client1, GIB), (client2, 2 * GIB)],
        mps=[(client1, GIB), (client2, 2 * GIB)],
        samples=[(server, 100, 95)],  # NVML lists only the MPS server's utilisation
    )
    used = NvmlBackend(FakeNvml(gpu)).processes()
    assert used is not None
    assert used[client1] == GpuUse(GIB, 0.0) and used[client2] == GpuUse(2 * GIB, 0.0)
    assert used[server] == GpuUse(500 << 20, 95.0)  # no lease's: the server is not a worker


def test_a_gpu_lost_after_discovery_gives_no_figures_and_no_error() -> None:
    nvml = FakeNvml(
        FakeGpu("GPU-a", 0, compute=[(10, GIB)]), FakeGpu("GPU-b", 1, compute=[(12, 1)])
    )
    backend = NvmlBackend(nvml)
    nvml.gpus[0].lost = True
    assert backend.processes() == {12: GpuUse(1, 0.0)}


@pytest.fixture
def worker_tree() -> Iterator[tuple[int, int]]:
    """A real worker-like tree: (worker pid, its child's pid)."""
    code = (
        "import subprocess, sys, time;"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
        "print(p.pid, flush=True); time.sleep(60)"
    )
    worker = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert worker.stdout is not None
    child = int(worker.stdout.readline())
    yield worker.pid, child
    subprocess.run(["kill", str(child)], check=False)
    worker.kill()
    worker.wait()


def test_a_lease_gets_what_its_worker_tree_uses(worker_tree: tuple[int, int]) -> None:
    worker, child = worker_tree
    figures = {worker: GpuUse(GIB, 10.0), child: GpuUse(2 * GIB, 25.0), 1: GpuUse(4 * GIB, 50.0)}
    measured = Meter(lambda: figures).measure_all({"L1": worker, "L2": None})
    assert (measured["L1"].gpu_memory_bytes, measured["L1"].gpu_sm_percent) == (3 * GIB, 35.0)
    assert measured["L1"].rss_bytes > 0  # psutil measured the same tree
    assert (measured["L2"].gpu_memory_bytes, measured["L2"].rss_bytes) == (0, 0)


def test_nvml_failing_leaves_host_figures(worker_tree: tuple[int, int]) -> None:
    def broken() -> dict[int, GpuUse]:
        raise DeviceError("NVML cannot count the GPUs: GPU is lost")

    measured = Meter(broken).measure_all({"L1": worker_tree[0]})
    assert measured["L1"].gpu_memory_bytes == 0 and measured["L1"].rss_bytes > 0


def test_heartbeat_and_metrics_carry_each_lease_s_gpu_use(
    tmp_path: Path, worker_tree: tuple[int, int]
) -> None:
    worker, child = worker_tree
    nvml = FakeNvml(
        FakeGpu("GPU-a", 0, used=3 * GIB, compute=[(child, 3 * GIB)], samples=[(child, 5, 70)]),
        FakeGpu("GPU-b", 1, lost=True),
    )
    backend = NvmlBackend(nvml)
    slots = Slots(str(tmp_path), backend)
    slots.prepare(pb.Lease(id="L1", device_ids=["0"], fraction=1.0, holder="n/c"))
    (tmp_path / "slots/L1/worker.pid").write_text(str(worker))
    [usage] = slots.usage()
    assert (usage.lease_id, usage.gpu_memory_bytes, usage.gpu_sm_percent) == ("L1", 3 * GIB, 70)
    registry = CollectorRegistry()
    registry.register(AcceptorCollector(slots, backend))
    value = registry.get_sample_value
    assert value("radium_acceptor_worker_gpu_memory_bytes", {"lease": "L1"}) == 3 * GIB
    assert value("radium_acceptor_worker_gpu_sm_ratio", {"lease": "L1"}) == pytest.approx(0.7)
    assert value("radium_acceptor_device_healthy", {"device": "0"}) == 1
    assert value("radium_acceptor_device_healthy", {"device": "1"}) == 0  # lost: not offered
    assert value("radium_acceptor_device_memory_used_bytes", {"device": "0"}) == 3 * GIB
    assert value("radium_acceptor_device_memory_used_bytes", {"device": "1"}) is None
