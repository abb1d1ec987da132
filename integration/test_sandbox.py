"""The worker sandbox for real: a lease's share enforced through this host's cgroups, and a
sandbox that cannot be built failing as one clear error, to the acceptor and to the client."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from integration.host import need_root
from integration.pool import free_port
from radium.acceptor.dataplane import DataPlane
from radium.acceptor.devices import CpuBackend
from radium.acceptor.limits import Cgroups
from radium.acceptor.sandbox import HostView, Sandbox, Tenant
from radium.acceptor.slots import Slots
from radium.acceptor.workers import ProcessWorker
from radium.configtree import SandboxConfig
from radium.errors import UnavailableError
from radium.proto import pool_pb2 as pb
from tests.interposer.harness import BARE_PYTHON, INTERPOSER

OVERFLOW = """
import radium_interposer.boot
import numpy
from radium_interposer.errors import WorkerGone
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
    slots.worker("small")  # as the lease's first connection would
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


CHECK_TOGETHER = """
import sys
from radium.acceptor.limits import Cgroups
from radium.errors import SandboxError
for _ in range(300):
    try:
        Cgroups().check()
    except SandboxError as exc:
        sys.exit(exc.one_line())
"""


def test_acceptors_starting_together_both_pass_the_cgroup_check() -> None:
    # Two acceptors of one cgroup (a test cluster's, a restart beside the old process) once
    # shared one probe cgroup: either could remove it under the other, whose check then
    # failed ('No such file or directory') and the acceptor with it: the likely cause of a CI
    # run whose two bridged acceptors never came up.
    need_root()
    checks = [
        subprocess.Popen([sys.executable, "-c", CHECK_TOGETHER], stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    failures = [c.communicate(timeout=120)[1].strip() for c in checks]
    assert [c.returncode for c in checks] == [0, 0], failures


def test_a_worker_outlives_the_thread_of_the_connection_that_started_it(tmp_path: Path) -> None:
    """bubblewrap --die-with-parent kills the sandbox when the *thread* that forked it ends;
    a data-plane connection's thread ends once it has handed its socket over."""
    need_root()
    slots = Slots(str(tmp_path), CpuBackend(1, 1024), sandbox=Sandbox(SandboxConfig()))
    slots.prepare(pb.Lease(id="l-1", device_ids=["cpu0"], credential="l-1-secret"))
    ours, theirs = socket.socketpair()
    try:
        connection = threading.Thread(target=slots.hand_over, args=("l-1", theirs, 5.0))
        connection.start()
        connection.join()
        worker = slots.workers["l-1"]
        assert isinstance(worker, ProcessWorker)
        with pytest.raises(subprocess.TimeoutExpired):  # a death signal would come at once
            worker.process.wait(timeout=2)
    finally:
        slots.teardown("l-1")
        ours.close()
        theirs.close()
        slots.close()


def broken_sandbox(tmp_path: Path) -> Sandbox:
    """A sandbox whose host view names a path that is not there: bubblewrap refuses it."""
    view = HostView(binds=(str(tmp_path / "not-there"),), links=())
    return Sandbox(SandboxConfig(), view)


def test_a_sandbox_that_cannot_be_built_fails_the_start_with_its_status(tmp_path: Path) -> None:
    need_root()
    with pytest.raises(UnavailableError) as failed:
        ProcessWorker(Tenant("l-9", 200009, tmp_path), tmp_path, broken_sandbox(tmp_path), print)
    assert failed.value.one_line() == (
        "the worker of lease l-9 exited (1) before it was ready; "
        "its own message is in the acceptor log"
    )


def test_a_sandbox_that_fails_just_before_it_is_let_go_fails_the_start_with_its_status(
    tmp_path: Path,
) -> None:
    """bubblewrap finds a bad bind after it has reported its sandbox and before it reads the
    "go": the last step before the go waits here until it has exited, so the go meets a closed
    pipe (seen once in CI as a "Broken pipe" refusal instead of the worker's status)."""
    need_root()

    def join_after_bubblewrap_exits(pid: int) -> None:
        # bubblewrap is our child: wait until it is a zombie (its pipes closed), never reap it.
        (bubblewrap,) = [p for p in psutil.Process().children() if p.name() == "bwrap"]
        deadline = time.monotonic() + 10
        while bubblewrap.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
            time.sleep(0.01)

    with pytest.raises(UnavailableError) as failed:
        ProcessWorker(
            Tenant("l-8", 200008, tmp_path), tmp_path, broken_sandbox(tmp_path),
            join_after_bubblewrap_exits,
        )  # fmt: skip
    assert failed.value.one_line() == (
        "the worker of lease l-8 exited (1) before it was ready; "
        "its own message is in the acceptor log"
    )


def test_the_client_learns_why_its_worker_could_not_start(tmp_path: Path) -> None:
    need_root()
    slots = Slots(str(tmp_path), CpuBackend(1, 1024), sandbox=broken_sandbox(tmp_path))
    lease = pb.Lease(id="doomed", device_ids=["cpu0"], credential="doomed-secret")
    slots.prepare(lease)  # process mode: nothing starts until the first connection
    plane = DataPlane(f"127.0.0.1:{free_port()}", slots)
    plane.start()
    try:
        env = {"PYTHONPATH": INTERPOSER, "RADIUM_DP_DIRECT": plane.address,
               "RADIUM_LEASE": "doomed", "RADIUM_LEASE_CREDENTIAL": "doomed-secret",
               "RADIUM_REMOTE": "statistics"}  # fmt: skip
        code = "import radium_interposer.boot\nimport statistics\n"
        done = subprocess.run(
            [BARE_PYTHON, "-c", code], env=env, capture_output=True, text=True, timeout=120
        )
    finally:
        plane.stop()
        slots.teardown("doomed")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "radium_interposer.errors.WorkerGone: radium: the lease's worker could not start: "
        "the worker of lease doomed exited (1) before it was ready; "
        "its own message is in the acceptor log"
    )
