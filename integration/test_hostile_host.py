"""Hostile neighbours on one host (issue 34, holes 6 and 10): real pools and acceptors.

- Two acceptors on one host, a lease on each whose worker runs a job (a sleeping subprocess):
  ending the lease on one must not touch the other's, and their workers never share a uid.
- The pool started from a directory holding a ``radium/`` package (a user's, planted), and a
  non-editable install's pool started from the checkout: the pool must import none of it, and
  its lease-socket front must start.

Each probe runs twice: as shipped, and ``unprotected``, through a ``radium`` that puts the old
code back (per-acceptor uids and kill-by-uid; ``python -m`` without ``-I``), to show the probe
catches the hole.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import tomllib

from integration.host import need_root
from integration.pool import AGENT_TOKEN, PoolCluster, wait_until
from radium.acceptor.limits import Cgroups, Share
from radium.acceptor.uids import UidLocks
from radium.configtree import SandboxConfig
from radium.errors import SandboxError
from radium.leaseclient.socket import LeaseSocket
from radium.proto import pool_pb2 as pb
from tests.interposer.harness import BARE_PYTHON, INTERPOSER

#: The acceptors' worker uids: a range of their own, so that the unprotected run (which shares
#: uids and kills by uid) can only ever meet its own workers, never another test's.
UID_MIN = 271000
REPO = Path(__file__).resolve().parent.parent

#: ``radium`` with the old code put back: per-acceptor uids, kill-by-uid, helpers without -I.
UNPROTECTED = """
import contextlib, os, subprocess, sys
import psutil
from radium.acceptor import launcher, uids
from radium.cli import main


def take(self):  # the lowest uid this acceptor does not hold: no lock, no look at the host
    uid = next(u for u in range(self.first, self.last + 1) if u not in self.held)
    self.held[uid] = os.open("/dev/null", os.O_RDONLY)
    return uid


def end_processes(self, lease_id, slot, record, lost):  # the worker's pid, then its uid's all
    pid = launcher.worker_pid(slot)
    if pid is not None:
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).kill()
    for process in psutil.process_iter(["uids"]):
        ids = process.info.get("uids")
        if record is not None and record.uid and ids and record.uid in (ids.real, ids.effective):
            with contextlib.suppress(psutil.Error):
                process.kill()
    if self.limits is not None:
        self.limits.remove(lease_id)
    return True


class Popen(subprocess.Popen):
    def __init__(self, args, *rest, **options):
        if list(args[1:3]) == ["-I", "-m"]:  # the lease front, as it was started
            args = [args[0], *args[2:]]
        super().__init__(args, *rest, **options)


uids.UidLocks.take = take
launcher.Launcher.end = end_processes
subprocess.Popen = Popen
sys.exit(main())
"""
SHIPPED = "import sys\nfrom radium.cli import main\nsys.exit(main())\n"

#: The tenant's job: a subprocess of its worker that outlives the call.
JOB = """
import os, subprocess


def start():
    job = subprocess.Popen(["sleep", "3600"], start_new_session=True)
    return {"uid": os.getuid(), "pid": job.pid}
"""
CLIENT = """
import json, sys
import radium_interposer.boot
import job
print(json.dumps(job.start()))
"""


def radium_cli(directory: Path, python: str, unprotected: bool) -> str:
    """A ``radium`` command run isolated (``-I``: no working directory on its path)."""
    path = directory / ("radium-unprotected" if unprotected else "radium-shipped")
    path.write_text(f"#!{python} -I\n" + (UNPROTECTED if unprotected else SHIPPED))
    path.chmod(0o755)
    return str(path)


@pytest.fixture(params=["protected", "unprotected"])
def unprotected(request: pytest.FixtureRequest) -> bool:
    need_root()
    return bool(request.param == "unprotected")


@pytest.fixture
def two_acceptors(tmp_path: Path, unprotected: bool) -> Iterator[PoolCluster]:
    """A pool and two confined acceptors of one device each, on this host."""
    cluster = PoolCluster(tmp_path, lease_ttl=300)
    cluster.cli = radium_cli(tmp_path, sys.executable, unprotected)
    config = tmp_path / "acceptors.toml"
    config.write_text(
        cluster.config.read_text()
        + f"[acceptor.sandbox]\nuid_min = {UID_MIN}\nuid_max = {UID_MIN + 99}\n"
    )
    try:
        cluster.start_pool()
        for name in ("host-acc-a", "host-acc-b"):
            cluster.start_acceptor(name, devices=1, config=config)
        cluster.wait_up("host-acc-a", "host-acc-b")
        yield cluster
    finally:
        cluster.stop()


def start_job(lease: pb.Lease, app: Path) -> dict[str, int]:
    """Remote ``job.start`` to the lease's worker: the job's uid, and its pid in the sandbox."""
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": f"{INTERPOSER}:{app}",
        "RADIUM_DP_DIRECT": lease.data_address,
        "RADIUM_LEASE": lease.id,
        "RADIUM_LEASE_CREDENTIAL": lease.credential,
        "RADIUM_REMOTE": "job:start",
    }
    done = subprocess.run(
        [BARE_PYTHON, "-c", CLIENT], env=env, cwd=app, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(json.loads(done.stdout.splitlines()[-1]))


def host_job(cluster: PoolCluster, acceptor: str) -> psutil.Process:
    """The job on this host: the ``sleep 3600`` under the acceptor's process (its worker's)."""
    service = cluster.acceptors[acceptor].process
    assert service is not None
    (job,) = [
        p
        for p in psutil.Process(service.pid).children(recursive=True)
        if p.cmdline() == ["sleep", "3600"]
    ]
    return job


def test_ending_a_lease_on_one_acceptor_spares_the_other_s_workers(
    two_acceptors: PoolCluster, unprotected: bool, tmp_path: Path
) -> None:
    cluster = two_acceptors
    app = tmp_path / "app"
    app.mkdir()
    (app / "job.py").write_text(JOB)
    client = cluster.client()
    try:
        leases = [client.allocate(gpus=1, holder=f"tenant-{n}") for n in ("a", "b")]
        victim, attacker = sorted(leases, key=lambda lease: lease.acceptor)
        assert (victim.acceptor, attacker.acceptor) == ("host-acc-a", "host-acc-b")
        victim_job, attacker_job = start_job(victim, app), start_job(attacker, app)
        victims, attackers = (
            host_job(cluster, victim.acceptor),
            host_job(cluster, attacker.acceptor),
        )
        assert victims.uids().real == victim_job["uid"]
        worker_pid = tmp_path / victim.acceptor / "slots" / victim.id / "worker.pid"
        worker = worker_pid.read_text()
        # The attacker ends its own lease; its acceptor tears the slot down.
        assert client.release(attacker.id)
        slot = tmp_path / attacker.acceptor / "slots" / attacker.id
        wait_until(lambda: not slot.exists(), 60, f"the slot of {attacker.id} torn down")
        assert not attackers.is_running()  # the attacker's own job ends with its lease
        if unprotected:  # one uid for both, killed whole: the victim's job went with it
            assert victim_job["uid"] == attacker_job["uid"] == UID_MIN
            assert not victims.is_running()
            return
        assert victim_job["uid"] != attacker_job["uid"]
        assert UID_MIN <= min(victim_job["uid"], attacker_job["uid"]) < UID_MIN + 100
        assert victims.is_running(), "ending lease B killed lease A's job"
        again = start_job(victim, app)  # and the victim's worker still answers, the same one
        assert again["uid"] == victim_job["uid"] and worker_pid.read_text() == worker
        assert client.release(victim.id)
    finally:
        client.close()


PLANTED = """
import pathlib
pathlib.Path({marker!r}).write_text("the pool ran a radium/ package of its working directory")
"""


def planted_directory(root: Path, marker: Path) -> Path:
    """A directory anyone may write, holding a ``radium/`` package that leaves ``marker``."""
    directory = root / "shared"
    (directory / "radium").mkdir(parents=True)
    (directory / "radium" / "__init__.py").write_text(PLANTED.format(marker=str(marker)))
    directory.chmod(0o1777)
    return directory


def run_pool(cluster: PoolCluster, cli: str, cwd: Path) -> None:
    """Start ``cluster``'s pool with ``cli``, from ``cwd``."""
    cluster.pool.argv = ["env", "-C", str(cwd), cli, "pool", "serve"]
    cluster.pool.start()


def front_answers(cluster: PoolCluster) -> None:
    """A lease allocated and released through the pool's lease socket (its front)."""

    async def lease() -> None:
        leases = LeaseSocket(cluster.leases, AGENT_TOKEN, "pool", timeout=10)
        granted = await leases.allocate(pb.AllocateRequest(gpus=1, holder="front"))
        assert await leases.release(granted.id)
        await leases.close()

    asyncio.run(lease())


def front_failed(cluster: PoolCluster) -> str:
    """The pool's log once it exited because its front did not start."""
    assert cluster.pool.process is not None
    cluster.pool.process.wait(timeout=60)
    log = cluster.pool.log.read_text(errors="replace")
    assert "the lease-socket front did not start" in log, log
    return log


def test_the_pool_runs_no_radium_package_of_its_working_directory(
    unprotected: bool, tmp_path: Path
) -> None:
    marker = tmp_path / "planted-ran"
    cwd = planted_directory(tmp_path, marker)
    cluster = PoolCluster(tmp_path, lease_ttl=30)
    try:
        run_pool(cluster, radium_cli(tmp_path, sys.executable, unprotected), cwd)
        cluster.start_pool()  # it answers (start_pool starts nothing that is running)
        cluster.start_acceptor("front-acc", devices=1)
        cluster.wait_up("front-acc")
        front_answers(cluster)
        # Unprotected, root ran the user's package (radium.pool itself came from this editable
        # install's finder, so the front worked: nothing but the marker says it).
        assert marker.exists() is unprotected
    finally:
        cluster.stop()


def package_dirs() -> list[str]:
    """The checkout's folders the package is built from (pyproject's package-dir)."""
    mapping = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    return sorted({folder.split("/")[0] for folder in mapping["package-dir"].values()})


@pytest.fixture(scope="module")
def wheel_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The Python of a venv with Radium installed from a wheel (``pip install .``), not
    editable; its dependencies are this venv's (a path file, without its editable finder)."""
    need_root()
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"  # the working tree as it is, built outside it
    source.mkdir()
    junk = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    for name in (*package_dirs(), "bin"):
        shutil.copytree(REPO / name, source / name, ignore=junk)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(root / "w"),
         str(source)], check=True, timeout=600,
    )  # fmt: skip
    venv = root / "venv"
    subprocess.run([sys.base_prefix + "/bin/python3", "-m", "venv", "--without-pip", str(venv)],
                   check=True, timeout=120)  # fmt: skip
    python = str(venv / "bin" / "python")
    site = subprocess.check_output(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], text=True
    ).strip()
    (Path(site) / "radium-test-deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    (wheel,) = (root / "w").glob("radium-*.whl")
    subprocess.run(
        [*pip, "--python", python, "install", "--no-deps", "--no-index", str(wheel)],
        check=True, timeout=600,
    )  # fmt: skip
    found = subprocess.check_output(
        [python, "-I", "-c", "import radium.pool; print(radium.pool.__file__)"], text=True
    )
    assert found.startswith(site), found  # the wheel's, not this checkout's
    return python


def test_a_non_editable_install_s_pool_starts_from_the_checkout(
    unprotected: bool, wheel_python: str, tmp_path: Path
) -> None:
    """The README's ``pip install .``, then the pool started in the checkout: its ``radium/``
    (which lacks radium.pool: package-dir maps it from pool/) must not hide the installed one."""
    cluster = PoolCluster(tmp_path, lease_ttl=30)
    try:
        run_pool(cluster, radium_cli(tmp_path, wheel_python, unprotected), REPO)
        if unprotected:
            assert "No module named 'radium.pool'" in front_failed(cluster)
            return
        cluster.start_pool()
        cluster.start_acceptor("front-acc", devices=1)
        cluster.wait_up("front-acc")
        front_answers(cluster)
    finally:
        cluster.stop()


#: A process that leaves a daemon (forked, in a session of its own) once told (it is then in
#: the lease's cgroup), and lives on beside it.
DAEMON = """
import os, sys, time
sys.stdin.readline()
if os.fork() == 0:
    os.setsid()
time.sleep(600)
"""


def test_a_lease_s_cgroup_is_killed_whole_and_nothing_else_of_its_uid(tmp_path: Path) -> None:
    """The kill itself, on this host's cgroups: a lease's process and the daemon it left in
    a session of its own die; a process of the same uid outside the lease's cgroups lives."""
    need_root()
    cgroups = Cgroups()
    cgroups.check()
    lease = f"kill-{os.getpid()}"
    ours = subprocess.Popen(
        [sys.executable, "-c", DAEMON],
        stdin=subprocess.PIPE,
        user=UID_MIN + 99,
        group=UID_MIN + 99,
    )
    stranger = subprocess.Popen(["sleep", "600"], user=UID_MIN + 99, group=UID_MIN + 99)
    try:
        cgroups.apply(lease, ours.pid, Share(processes=10))
        assert ours.stdin is not None
        ours.stdin.write(b"fork\n")
        ours.stdin.flush()
        wait_until(lambda: len(psutil.Process(ours.pid).children()) == 1, 30, "the daemon")
        (daemon,) = psutil.Process(ours.pid).children()
        assert cgroups.kill(lease) is True
        assert ours.wait(timeout=30) == -9
        wait_until(lambda: not daemon.is_running(), 30, "the daemon killed")
        assert stranger.poll() is None
    finally:
        for process in (ours, stranger):
            process.kill()
            process.wait()
        cgroups.remove(lease)


def test_a_restarted_acceptor_keeps_its_leases_uids(tmp_path: Path) -> None:
    """The acceptor dies (its locks with it) and comes back: its lease keeps its uid, locked
    again, so no other acceptor of the host can take it."""
    need_root()
    cluster = PoolCluster(tmp_path, lease_ttl=300, heartbeat_timeout=300)  # the lease stays
    config = tmp_path / "acceptor.toml"
    config.write_text(
        cluster.config.read_text()
        + f"[acceptor.sandbox]\nuid_min = {UID_MIN + 50}\nuid_max = {UID_MIN + 59}\n"
    )
    app = tmp_path / "app"
    app.mkdir()
    (app / "job.py").write_text(JOB)
    client = cluster.client()
    try:
        cluster.start_pool()
        cluster.start_acceptor("host-acc-r", devices=1, config=config)
        cluster.wait_up("host-acc-r")
        lease = client.allocate(gpus=1, holder="restarted")
        before = start_job(lease, app)["uid"]
        cluster.acceptors["host-acc-r"].kill()  # SIGKILL: no shutdown of its own
        cluster.start_acceptor(
            "host-acc-r", devices=1, config=config, data_address=lease.data_address
        )
        log = cluster.acceptors["host-acc-r"].log

        def registered_again() -> bool:
            return log.read_text().count("registered with the pool") == 2

        wait_until(registered_again, 60, "the restarted acceptor registered")
        assert start_job(lease, app)["uid"] == before
        other = UidLocks(SandboxConfig().uid_lock_dir, before, before)
        with pytest.raises(SandboxError, match="in use on this host"):
            other.take()
        other.close()
        assert client.release(lease.id)
    finally:
        client.close()
        cluster.stop()
