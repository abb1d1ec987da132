"""A lease's share is enforced on its worker through this host's real cgroups."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from integration.host import need_root
from integration.pool import free_port
from radium.acceptor.dataplane import DataPlane
from radium.acceptor.devices import CpuBackend
from radium.acceptor.limits import Cgroups
from radium.acceptor.sandbox import Sandbox
from radium.acceptor.slots import Slots
from radium.config import SandboxConfig
from radium.proto import pool_pb2 as pb
from tests.interposer.harness import BARE_PYTHON, INTERPOSER

OVERFLOW = """
import radium_interposer.boot
import numpy
from radium_interposer.client import WorkerGone
small = numpy.ones(1 << 20)        # 8 MiB: within the lease's 64 MiB
print(float(small.sum()))
try:
    big = numpy.ones(64 << 20)     # 512 MiB: the worker's cgroup kills it
    print("survived", float(big.sum()))
except (WorkerGone, MemoryError) as e:
    print("refused", type(e).__name__)
"""


@pytest.fixture
def limited(tmp_path: Path) -> Iterator[tuple[Slots, DataPlane, Cgroups]]:
    need_root()
    cgroups = Cgroups()
    cgroups.check()
    sandbox = Sandbox(SandboxConfig(max_processes=100))
    slots = Slots(str(tmp_path), CpuBackend(2, 1024), sandbox=sandbox, limits=cgroups)
    slots.prepare(pb.Lease(id="small", device_ids=["cpu0"], fraction=0.25, memory_mib=64,
                           credential="small-secret"))  # fmt: skip
    plane = DataPlane(f"127.0.0.1:{free_port()}", slots)
    plane.start()
    try:
        yield slots, plane, cgroups
    finally:
        plane.stop()
        slots.teardown("small")


def test_memory_and_cpu_share_are_enforced(limited: tuple[Slots, DataPlane, Cgroups]) -> None:
    slots, plane, cgroups = limited
    directories = cgroups._dirs("small")
    assert directories, "this host has no cgroup hierarchy for the test"
    # The sandbox and the worker in it (not bubblewrap's monitor outside it).
    monitor = psutil.Process(slots.workers["small"].pid)
    (worker,) = [
        p for p in monitor.children(recursive=True) if "radium_interposer" in p.cmdline()[2]
    ]
    for directory in directories.values():
        assert str(worker.pid) in (directory / "cgroup.procs").read_text().split()
        assert str(monitor.pid) not in (directory / "cgroup.procs").read_text().split()
    if cgroups.v2:
        assert (directories[""] / "cpu.max").read_text().split() == ["25000", "100000"]
        assert (directories[""] / "pids.max").read_text().strip() == "100"
    else:
        assert (directories["cpu"] / "cpu.cfs_quota_us").read_text().strip() == "25000"
        limit = (directories["memory"] / "memory.limit_in_bytes").read_text()
        assert int(limit) == 64 << 20
        assert (directories["pids"] / "pids.max").read_text().strip() == "100"
    env = {
        "PYTHONPATH": INTERPOSER,
        "RADIUM_DP_DIRECT": plane.address,
        "RADIUM_LEASE": "small",
        "RADIUM_LEASE_CREDENTIAL": "small-secret",
        "RADIUM_REMOTE": "numpy",
    }
    done = subprocess.run(
        [BARE_PYTHON, "-c", OVERFLOW], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.stdout.splitlines()[0] == "1048576.0", done.stderr
    assert done.stdout.splitlines()[1].startswith("refused"), done.stdout
    slots.teardown("small")
    assert not any(directory.exists() for directory in directories.values())
