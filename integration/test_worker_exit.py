"""A lease's worker that dies (a signal, an exit status) leaves its cause in the acceptor log,
with its last lines of output; a worker that floods its output costs that log a bounded budget.

A real pool and a real confined acceptor (bubblewrap, cgroups, the worker's own uid); the
tenant's client remotes a module whose functions write to the worker's own stderr (fd 2: not
the call's captured ``sys.stderr``, which goes back to the client) and then die, or flood.

Container-mode workers too, from an acceptor's slots in this process with a private dockerd:
docker's exit code, whether it was the memory cap, and the container's last lines.

The flood probe runs twice: as shipped, and ``unprotected``, through a ``radium`` that gives
the worker the acceptor's own stderr again (as before issue 35), to show the probe catches it.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration import images
from integration.dockerd import Dockerd
from integration.host import need_root
from integration.pool import PoolCluster, free_port, wait_until
from integration.radium_env import RadiumEnv
from radium.acceptor import worker_output
from radium.acceptor.dataplane import DataPlane
from radium.acceptor.devices import CpuBackend
from radium.acceptor.engines import Docker
from radium.acceptor.limits import Cgroups
from radium.acceptor.sandbox import Sandbox
from radium.acceptor.slots import Slots
from radium.configtree import SandboxConfig
from radium.proto import pool_pb2 as pb
from tests.interposer.harness import BARE_PYTHON, INTERPOSER

#: The tenant's module, run in the worker.
CRASH = """
import os, signal


def die(how):
    os.write(2, b"crash: about to die by " + how.encode() + b"\\n")
    if how == "signal":
        os.kill(os.getpid(), signal.SIGKILL)
    if how == "memory":  # past the lease's 256 MiB: its cgroup's OOM killer
        return len(b"x" * (512 << 20))
    os._exit(3)


def flood(lines):
    row = b"flood " + b"x" * 500 + b"\\n"
    for _ in range(lines):
        os.write(2, row)
    return lines
"""
CLIENT = """
import sys
import radium_interposer.boot
import crash
from radium_interposer.errors import WorkerGone
try:
    print("returned", getattr(crash, sys.argv[1])(eval(sys.argv[2])))
except WorkerGone as exc:
    print("WorkerGone", exc)
"""
#: ``radium`` with the old code path put back: the worker writes to the acceptor's stderr.
UNPROTECTED = """
import sys
from radium.acceptor import sandbox
from radium.cli import main

spawn = sandbox.Sandbox.spawn


def old_spawn(self, tenant, argv, keep_fd, join, output=None):
    return spawn(self, tenant, argv, keep_fd, join, None)


sandbox.Sandbox.spawn = old_spawn
sys.exit(main())
"""
FLOOD_LINES = 20000  # 10 MB
IMAGE = "radium-test/bookworm:worker-exit"
ACCEPTOR_TABLE = "[acceptor]\ncpu_memory_mib = 1024\n"


@pytest.fixture
def acceptor(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[PoolCluster]:
    """A pool and one confined acceptor; ``unprotected`` (indirect) runs the old code path."""
    need_root()
    cluster = PoolCluster(tmp_path, lease_ttl=300)
    if getattr(request, "param", "protected") == "unprotected":
        cli = tmp_path / "radium-unprotected"
        cli.write_text(f"#!{sys.executable} -I\n{UNPROTECTED}")
        cli.chmod(0o755)
        cluster.cli = str(cli)
    # A device of 1 GiB: a lease of 256 MiB gets a quarter of a CPU to fill it (of the default
    # 16 GiB, 1/64: its OOM took half a minute).
    config = tmp_path / "acceptor.toml"
    config.write_text(cluster.config.read_text().replace("[acceptor]\n", ACCEPTOR_TABLE, 1))
    try:
        cluster.start_pool()
        cluster.start_acceptor("exit-acc", devices=1, config=config)
        cluster.wait_up("exit-acc")
        yield cluster
    finally:
        cluster.stop()


def remote(lease: pb.Lease, app: Path, function: str, argument: str) -> str:
    """``crash.FUNCTION(ARGUMENT)`` remoted to the lease's worker: what the client printed."""
    (app / "crash.py").write_text(CRASH)
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": f"{INTERPOSER}:{app}",
        "RADIUM_DP_DIRECT": lease.data_address,
        "RADIUM_LEASE": lease.id,
        "RADIUM_LEASE_CREDENTIAL": lease.credential,
        "RADIUM_REMOTE": "crash:die,crash:flood",
    }
    done = subprocess.run(
        [BARE_PYTHON, "-c", CLIENT, function, argument],
        env=env,
        cwd=app,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize(
    ("how", "ended"),
    [
        ("signal", "was killed by SIGKILL (status 137)"),
        ("exit", "exited with status 3"),
        (
            "memory",
            "was killed by SIGKILL (status 137): its memory cap (the OOM killer killed 1 of its "
            "processes)",
        ),
    ],
)
def test_a_worker_that_dies_leaves_its_cause_and_last_lines_in_the_acceptor_log(
    acceptor: PoolCluster, tmp_path: Path, how: str, ended: str
) -> None:
    client = acceptor.client()
    try:
        share = {"memory_mib": 256} if how == "memory" else {"gpus": 1}
        lease = client.allocate(holder="tenant", **share)  # type: ignore[arg-type]
        assert remote(lease, tmp_path, "die", repr(how)).startswith("WorkerGone")
        log = acceptor.acceptors["exit-acc"].log
        pid = (tmp_path / "exit-acc" / "slots" / lease.id / "worker.pid").read_text()
        said = f"lease {lease.id}: the worker (pid {pid}) {ended}; its last "

        def reported() -> bool:
            return said in log.read_text(errors="replace")

        wait_until(reported, 60, f"{said!r} in {log}")
        text = log.read_text(errors="replace")
        assert f"lease {lease.id}: worker| crash: about to die by {how}" in text
        # The lease goes on: its next call gets a new worker.
        assert remote(lease, tmp_path, "flood", "1") == "returned 1"
    finally:
        client.close()


@pytest.mark.parametrize("acceptor", ["protected", "unprotected"], indirect=True)
def test_a_worker_flooding_its_output_costs_the_acceptor_log_a_bounded_budget(
    acceptor: PoolCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    unprotected = "unprotected" in request.node.name
    log = acceptor.acceptors["exit-acc"].log
    client = acceptor.client()
    try:
        lease = client.allocate(gpus=1, holder="tenant")
        assert remote(lease, tmp_path, "flood", "1") == "returned 1"  # the worker is up
        before = log.stat().st_size
        assert remote(lease, tmp_path, "flood", str(FLOOD_LINES)) == f"returned {FLOOD_LINES}"
        grew = log.stat().st_size - before
        print(f"{'unprotected' if unprotected else 'protected'}: the log grew by {grew} bytes")
        if unprotected:
            assert grew >= FLOOD_LINES * 500  # every byte of the flood
            return
        assert grew < 300 * 1024  # the burst of 200 lines (+ the notice), not 10 MB

        # The legitimate user of the lease is unaffected; and the acceptor says what it dropped
        # with the first line it logs again (once its budget has refilled: calls write lines).
        def counted() -> bool:
            assert remote(lease, tmp_path, "flood", "2") == "returned 2"
            return "lines of its worker's output not logged" in log.read_text(errors="replace")

        wait_until(counted, 120, "the count of dropped lines")
    finally:
        client.close()


@pytest.fixture
def container_slots(
    radium: RadiumEnv, tmp_path: Path
) -> Iterator[tuple[Slots, DataPlane, Dockerd]]:
    """An acceptor's slots and data plane in this process (its log is caplog's), confined,
    with a private dockerd holding a Debian image: container-mode workers."""
    need_root()
    daemon = Dockerd({"radium": radium.runtime}, radium.environ())
    plane = None
    try:
        daemon.start()
        daemon.import_image(images.debian_tar("bookworm"), IMAGE)
        engine = Docker(f"unix://{daemon.socket}")
        sandbox = Sandbox(SandboxConfig())
        state = str(tmp_path / "state")
        slots = Slots(state, CpuBackend(1, 1024), sandbox=sandbox, limits=Cgroups(), engine=engine)
        plane = DataPlane(f"127.0.0.1:{free_port()}", slots)
        plane.start()
        yield slots, plane, daemon
    finally:
        if plane is not None:
            plane.stop()
        daemon.stop()


@pytest.mark.parametrize(
    ("how", "ended"),
    [  # (a SIGKILL of its own is ignored there: the worker is its container's pid 1)
        ("exit", "exited with status 3"),
        ("memory", "was killed by SIGKILL (status 137): its memory cap (OOM killer)"),
    ],
)
def test_a_container_worker_that_dies_leaves_its_cause_and_last_lines_in_the_log(
    container_slots: tuple[Slots, DataPlane, Dockerd],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    how: str,
    ended: str,
) -> None:
    caplog.set_level(logging.INFO)
    slots, plane, _ = container_slots
    lease = pb.Lease(id=f"box-{how}", device_ids=["cpu0"], memory_mib=256, credential="box-secret",
                     image=IMAGE, worker="container", data_address=plane.address)  # fmt: skip
    slots.prepare(lease)  # a container-mode worker starts at grant
    try:
        assert remote(lease, tmp_path, "die", repr(how)).startswith("WorkerGone")
    finally:
        slots.teardown(lease.id)  # the lease ends: its worker is stopped, its end reported
    said = [r.getMessage() for r in caplog.records if r.name == worker_output.__name__]
    assert said[0].startswith(f"lease {lease.id}: the worker in container ")
    assert said[0].endswith(f" of {IMAGE} {ended}; its last {len(said) - 1} lines of output follow")
    assert f"lease {lease.id}: worker| crash: about to die by {how}" in said
