"""Hostile tenants: remote code that attacks the acceptor, the pool and the other leases.

One acceptor in a network namespace of its own, with its own dockerd (container-mode workers)
and two CPU devices: the attacker's lease and a victim lease. The attack (``tenant_probes``)
is shipped to the attacker's worker by the interposer, from ``radium exec`` and from a
``docker run --network none --runtime=radium`` container, with process- and container-mode
workers. The whole module runs twice: on the acceptor as configured (confined: every probe
must fail) and once with ``acceptor.sandbox.enabled = false``, where the probes are shown to
work, so that each of them could catch its hole.
"""

from __future__ import annotations

import json
import secrets
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from integration import images, tenant_probes
from integration.dockerd import Dockerd
from integration.netns import Network
from integration.pool import wait_until
from integration.radium_env import RadiumEnv
from integration.site import RADIUM_CLI, Site, open_site
from integration.test_leases import stop_agent
from radium.agent.broker import dial
from radium.proto import pool_pb2 as pb
from tests.interposer.harness import BARE_PYTHON, INTERPOSER

ACCEPTOR = "tenant-acc"
DEVICE_MIB = 256
MAX_PROCESSES = 64
MAIN = """
import json, sys
import tenant_probes
targets = json.load(open(sys.argv[1]))
result = []
try:
    if sys.argv[2] == "attack":
        result = tenant_probes.attack(targets)
    elif sys.argv[2] == "workspace":
        result = tenant_probes.workspace()
    elif sys.argv[2] == "fork":
        result = tenant_probes.fork_bomb(int(sys.argv[3]))
    else:  # first what fits in the lease, then the bomb
        result.append(tenant_probes.memory_bomb(64))
        result.append(tenant_probes.memory_bomb(int(sys.argv[3])))
except Exception as exc:
    result.append({"raised": type(exc).__name__})
print(json.dumps(result))
"""
REMOTE = ",".join(f"tenant_probes:{f}" for f in ("attack", "workspace", "fork_bomb", "memory_bomb"))
#: What docker's defaults alone already stop in a container-mode worker, even unconfined: the
#: host's files, processes and network are not in the container. The sandbox's settings stop
#: the rest there (root, writes to the image, namespaces ...).
CONTAINER_DEFAULTS_STOP = {
    "read_config", "read_pool_db", "read_other_credential", "list_slots", "read_other_memory",
    "signal_other", "ptrace_other", "connect_pool", "connect_acceptor", "connect_outside",
    "interfaces", "host_processes", "write_state", "mount", "load_module", "create_namespace",
}  # fmt: skip


@dataclass
class Tenancy:
    site: Site
    client: Dockerd
    env: dict[str, str]
    config: Path
    image: str
    app: Path
    outside: str


@pytest.fixture(scope="module")
def tenancy(
    network: Network, radium: RadiumEnv, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Tenancy]:
    root = tmp_path_factory.mktemp("tenancy")
    outside = socket.create_server((network.gateway, 0))  # "the outside": a host listener
    with open_site(network, radium, root, ()) as site:
        config = radium.client_config("tenancy.toml", site.cluster.client_table(), root / "agent")
        client = Dockerd({"radium": radium.runtime}, radium.environ(config))
        try:
            client.start()
            image = f"localhost:{site.port}/radium-test/bookworm:tenancy"
            client.import_image(images.debian_tar("bookworm"), image)
            assert client.docker("push", image, check=False, timeout=600).returncode == 0
            app = root / "app"
            app.mkdir(mode=0o755)
            shutil.copy(tenant_probes.__file__, app / "tenant_probes.py")
            (app / "main.py").write_text(MAIN)
            env = {**radium.environ(config), "DOCKER_HOST": f"unix://{client.socket}"}
            yield Tenancy(site, client, env, config, image, app, f"{network.gateway}:"
                          f"{outside.getsockname()[1]}")  # fmt: skip
        finally:
            client.stop()
            stop_agent(config)
            outside.close()


@pytest.fixture(scope="module", params=["confined", "unconfined"])
def confined(request: pytest.FixtureRequest, tenancy: Tenancy) -> Iterator[bool]:
    """The acceptor, confining its workers or (to show the probes work) not."""
    site, on = tenancy.site, request.param == "confined"
    config = acceptor_config(site, on)
    config.write_text(
        site.cluster.config.read_text().replace(
            "[acceptor]\n", f"[acceptor]\ncpu_memory_mib = {DEVICE_MIB}\n"
        )
        + f"[acceptor.sandbox]\nenabled = {str(on).lower()}\nmax_processes = {MAX_PROCESSES}\n"
    )
    old = site.cluster.acceptors.get(ACCEPTOR)
    registered = old.log.read_text().count("registered with the pool") if old else 0
    if old is not None:
        old.kill(signal.SIGTERM)
    site.add_acceptor(ACCEPTOR, config)
    service = site.cluster.acceptors[ACCEPTOR]
    wait_until(
        lambda: service.log.read_text().count("registered with the pool") > registered,
        60,
        "the acceptor to register",
    )
    added = site.radium("images", "add", tenancy.image)
    assert added.returncode == 0, added.stdout + added.stderr
    yield on


def acceptor_config(site: Site, confined: bool) -> Path:
    return site.root / f"acceptor-{'confined' if confined else 'unconfined'}.toml"


@dataclass
class Victim:
    lease: pb.Lease
    pid: int


@pytest.fixture
def victim(tenancy: Tenancy, confined: bool) -> Iterator[Victim]:
    """Another tenant's lease on the same acceptor, its worker running."""
    client = tenancy.site.cluster.client()
    lease = client.allocate(gpus=1, holder="victim", ttl=600)
    try:
        # Its first connection starts its worker.
        dial(lease.data_address, lease.id, lease.credential).close()
        slot = state_dir(tenancy) / "slots" / lease.id
        wait_until(lambda: worker_pid(slot) is not None, 30, "the victim's worker")
        pid = worker_pid(slot)
        assert pid is not None
        yield Victim(lease, pid)
    finally:
        client.release(lease.id)
        client.close()


def state_dir(tenancy: Tenancy) -> Path:
    return tenancy.site.cluster.root / ACCEPTOR


def worker_pid(slot: Path) -> int | None:
    """The victim's Python worker (inside its sandbox, when there is one)."""
    try:
        top = psutil.Process(int((slot / "worker.pid").read_text()))
        for process in [top, *top.children(recursive=True)]:
            if "radium_interposer.worker" in " ".join(process.cmdline()):
                return int(process.pid)
    except (OSError, ValueError, psutil.Error):
        pass
    return None


def targets(tenancy: Tenancy, confined: bool, victim: Victim, token: str) -> dict[str, object]:
    state = state_dir(tenancy)
    acceptor = tenancy.site.cluster.acceptors[ACCEPTOR]
    assert acceptor.process is not None
    return {
        "config": str(acceptor_config(tenancy.site, confined)),
        "pool_db": str(tenancy.site.cluster.root / "pool.db"),
        "slots": str(state / "slots"),
        "other_record": str(state / "slots" / victim.lease.id / "lease.json"),
        "victim_pid": victim.pid,
        "acceptor_pid": acceptor.process.pid,
        "pool": tenancy.site.cluster.address,
        "data_plane": victim.lease.data_address,
        "outside": tenancy.outside,
        "write_etc": f"/etc/radium-probe-{token}",
        "write_usr": f"/usr/radium-probe-{token}",
        "write_state": str(state / f"radium-probe-{token}"),
    }


def run_tenant(
    tenancy: Tenancy, origin: str, worker: str, *args: str
) -> subprocess.CompletedProcess[str]:
    """``main.py ARGS`` with the probes remoted, as ``radium exec`` or in a container."""
    if origin == "exec":
        image = ["--image", tenancy.image] if worker == "container" else []
        argv = [RADIUM_CLI, "exec", "--remote", REMOTE, *image, "--worker", worker, "--",
                BARE_PYTHON, "main.py", *args]  # fmt: skip
    else:
        argv = [RADIUM_CLI, "run", "--gpus", "1", "--remote", REMOTE, "--worker", worker, "--",
                "--rm", "--network", "none", "-v", f"{tenancy.app}:/app", "-w", "/app",
                tenancy.image, "python3", "main.py", *args]  # fmt: skip
    return subprocess.run(
        argv, env=tenancy.env, cwd=tenancy.app, capture_output=True, text=True, timeout=600
    )


#: How each probe must be refused in a confined worker (either mode): the layer that stops it.
REFUSALS = {
    "root": ("no: uid 2",),  # a uid of the lease's own, from acceptor.sandbox's range
    "setuid_root": ("no: EPERM",),
    "read_config": ("no: ENOENT",),  # not in the worker's view at all
    "read_pool_db": ("no: ENOENT",),
    "read_other_credential": ("no: ENOENT",),
    "list_slots": ("no: ENOENT",),
    "read_other_memory": ("no: ENOENT",),  # another PID namespace
    "signal_other": ("no: ESRCH",),
    "ptrace_other": ("no: ptrace: Operation not permitted",),  # seccomp
    "connect_pool": ("no: ENETUNREACH",),  # a network namespace with lo only
    "connect_acceptor": ("no: ENETUNREACH",),
    "connect_outside": ("no: ENETUNREACH",),
    "interfaces": ("no: only lo",),
    "host_processes": ("no: the acceptor is not visible",),
    "write_etc": ("no: EACCES", "no: EROFS"),  # the sandbox's own /etc, or a read-only image
    "write_usr": ("no: EROFS",),
    "write_state": ("no: ENOENT",),
    "mount": ("no: EPERM",),  # seccomp
    "load_module": ("no: EPERM",),
    "create_namespace": ("no: unshare: Operation not permitted",),
}


def expected(confined: bool, worker: str) -> dict[str, bool]:
    """Which probes must work: none confined; unconfined, all but what a container stops."""
    return {
        name: not confined and not (worker == "container" and name in CONTAINER_DEFAULTS_STOP)
        for name in tenant_probes.PROBES
    }


@pytest.mark.parametrize("worker", ["process", "container"])
@pytest.mark.parametrize("origin", ["exec", "container"])
def test_remote_code_cannot_reach_what_is_not_its_lease(
    tenancy: Tenancy, confined: bool, victim: Victim, origin: str, worker: str
) -> None:
    token = secrets.token_hex(4)
    plan = targets(tenancy, confined, victim, token)
    (tenancy.app / f"targets-{token}.json").write_text(json.dumps(plan))
    host_files = [Path(str(plan[key])) for key in ("write_etc", "write_usr", "write_state")]
    try:
        done = run_tenant(tenancy, origin, worker, f"targets-{token}.json", "attack")
        assert done.returncode == 0, done.stdout + done.stderr
        results: dict[str, str] = json.loads(done.stdout.splitlines()[-1])
        worked = {name: outcome.startswith("yes") for name, outcome in results.items()}
        table = "\n".join(f"{name:24} {outcome}" for name, outcome in results.items())
        print(
            f"\n{'confined' if confined else 'UNCONFINED'} {worker} worker from {origin}:\n{table}"
        )
        assert worked == expected(confined, worker), table
        if confined:
            assert set(REFUSALS) == set(results)
            wrong = {n: r for n, r in results.items() if not r.startswith(REFUSALS[n])}
            assert not wrong, table
        # The host's files tell the same story as the probes.
        written = [path.exists() for path in host_files]
        assert written == [not confined and worker == "process"] * 3
    finally:
        for path in host_files:
            path.unlink(missing_ok=True)
    assert victim.pid == worker_pid(state_dir(tenancy) / "slots" / victim.lease.id)


@pytest.mark.parametrize("worker", ["process", "container"])
def test_the_lease_s_own_scratch_and_home_work(
    tenancy: Tenancy, confined: bool, worker: str
) -> None:
    token = secrets.token_hex(4)
    (tenancy.app / f"targets-{token}.json").write_text("{}")
    done = run_tenant(tenancy, "exec", worker, f"targets-{token}.json", "workspace")
    assert done.returncode == 0, done.stdout + done.stderr
    where = json.loads(done.stdout.splitlines()[-1])
    assert len(where) == 3 and set(where.values()) == {"ok"}, where
    assert "/lease" in where or not confined  # confined, home is the lease's directory


class Pinger:
    """Calls the victim's worker over the data plane without pause, from another process."""

    def __init__(self, victim: Victim, stop: Path) -> None:
        code = (
            "import os, time, math\n"
            "import radium_interposer.boot\n"
            "import statistics\n"
            f"while not os.path.exists({str(stop)!r}):\n"
            "    assert statistics.mean([1, 3]) == 2\n"
            "    print(time.time(), flush=True)\n"
            "    time.sleep(0.01)\n"
        )
        env = {
            "PYTHONPATH": INTERPOSER,
            "RADIUM_DP_DIRECT": victim.lease.data_address,
            "RADIUM_LEASE": victim.lease.id,
            "RADIUM_LEASE_CREDENTIAL": victim.lease.credential,
            "RADIUM_REMOTE": "statistics",
        }
        self.process = subprocess.Popen(
            [BARE_PYTHON, "-c", code], env=env, stdout=subprocess.PIPE, text=True
        )
        self.times: list[float] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.times.append(float(line))

    def finish(self) -> int:
        code = self.process.wait(timeout=120)
        self.reader.join(timeout=10)
        return code


@pytest.mark.parametrize("worker", ["process", "container"])
def test_fork_and_memory_bombs_stay_in_their_lease(
    tenancy: Tenancy, confined: bool, victim: Victim, worker: str, tmp_path: Path
) -> None:
    token = secrets.token_hex(4)
    (tenancy.app / f"targets-{token}.json").write_text("{}")
    stop = tmp_path / "stop"
    pinger = Pinger(victim, stop)
    try:
        wait_until(lambda: len(pinger.times) > 0, 60, "the victim's first answer")
        started = time.time()
        forked = run_tenant(tenancy, "exec", worker, f"targets-{token}.json", "fork", "1000")
        fork_done = time.time()
        memory = run_tenant(tenancy, "exec", worker, f"targets-{token}.json", "memory", "1024")
        ended = time.time()
    finally:
        stop.touch()
    assert pinger.finish() == 0, "the victim's calls failed"
    assert forked.returncode == 0, forked.stdout + forked.stderr
    processes = json.loads(forked.stdout.splitlines()[-1])
    reached = json.loads(memory.stdout.splitlines()[-1]) if memory.stdout else None
    print(f"\n{'confined' if confined else 'UNCONFINED'} {worker}: fork bomb got {processes} "
          f"processes, memory bomb {reached} ({memory.returncode}); victim answered "
          f"{len(pinger.times)} calls")  # fmt: skip
    if confined:
        assert processes < MAX_PROCESSES
        # The worker allocates within its cap; beyond it, the cap kills it (or refuses).
        assert reached[0] == 64, memory.stdout + memory.stderr
        assert reached[1] in ({"raised": "WorkerGone"}, {"raised": "MemoryError"}), reached
    else:
        assert (processes, reached) == (1000, [64, 1024])
    # The other lease kept answering while each bomb went off.
    for begin, end in ((started, fork_done), (fork_done, ended)):
        assert any(begin <= at <= end for at in pinger.times), (begin, end)
