"""Two teams share one pool (docs/scheduling.md): queue A borrows every GPU, queue B asks for
its quota back, and one of A's containers is told, through its next call, that it must go.

Real parts: the pool (mutual TLS), a CPU acceptor in its own network namespace, dockerd with the
radium runtime and the node agent; containers have no network and no numpy (it is remote).
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.dockerd import Dockerd
from integration.netns import Network
from integration.pool import PoolCluster, wait_until
from integration.radium_env import RadiumEnv
from integration.test_leases import radium_dockerd, radium_run, stop_agent

IMAGE = "radium-test/bookworm:sharing"
GRACE = 8
#: Queue "a" comes from the config file; "b" is added with the CLI by the test.
POOL_EXTRA = f"preempt_grace = {GRACE}\n[pool.queues.a]\ndeserved = 1\n"

#: A preemptible container of A: computes until told, reports what lease.json then says, and
#: goes on until its worker is gone.
TRAIN = """
import json, time
import numpy as np
from radium_interposer import LeasePreempted

def state():
    with open("/run/radium/lease.json") as f:
        return json.load(f)

deadline = time.time() + 120
calls = 0
while time.time() < deadline:
    try:
        calls += int(np.ones(2).sum()) // 2
    except LeasePreempted as exc:
        print("PREEMPTED", exc, flush=True)
        while state().get("state") == "active" and time.time() < deadline:
            time.sleep(0.2)
        print("LEASE", state().get("state"), state().get("message"), flush=True)
        try:
            while time.time() < deadline:
                np.ones(2).sum()
                time.sleep(0.2)
        except Exception as gone:
            print("GONE", type(gone).__name__, flush=True)
        break
    except Exception as other:
        print("FAILED", type(other).__name__, other, flush=True)
        break
    if open("/signal/stop").read().strip() == "stop":
        break
    time.sleep(0.2)
print("CALLS", calls, flush=True)
"""
B_WORK = "import numpy as np; print(float(np.linalg.inv(np.eye(3) * 2).sum()))"


@pytest.fixture(scope="module")
def sharing(
    radium: RadiumEnv, network: Network, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[PoolCluster, Path]]:
    root = tmp_path_factory.mktemp("sharing")
    cluster = PoolCluster(root, host=network.gateway, tls=True, lease_ttl=10, pool_extra=POOL_EXTRA)
    config = radium.client_config(
        "sharing.toml", cluster.client_table(), root / "agent", node="sharenode"
    )
    try:
        cluster.start_pool()
        address = network.add_host("rdm-share")
        cluster.start_acceptor(
            "rdm-share", prefix=network.exec_prefix("rdm-share"), data_address=f"{address}:7401"
        )
        cluster.wait_up("rdm-share")
        yield cluster, config
    finally:
        stop_agent(config)
        cluster.stop()


@pytest.fixture(scope="module")
def sharing_dockerd(radium: RadiumEnv, sharing: tuple[PoolCluster, Path]) -> Iterator[Dockerd]:
    with radium_dockerd(radium, sharing[1], IMAGE) as daemon:
        yield daemon


def cli(cluster: PoolCluster, *args: str) -> subprocess.CompletedProcess[str]:
    """``radium ARGS`` as the pool's administrator (queues need the admin certificate)."""
    admin = cluster.root / "admin.toml"
    if not admin.exists():
        admin.write_text(cluster.client_table(cert="admin"))
    return subprocess.run(
        [cluster.cli, *args],
        env={**cluster.env, "RADIUM_CONFIG": str(admin)},
        capture_output=True,
        text=True,
        timeout=30,
    )


def queues(cluster: PoolCluster) -> dict[str, dict[str, object]]:
    listed = cli(cluster, "queues", "ls", "--json")
    assert listed.returncode == 0, listed.stderr
    return {q["queue"]["name"]: q for q in json.loads(listed.stdout)}


def test_queues_are_administered_with_clear_errors_and_nothing_changed(
    sharing: tuple[PoolCluster, Path],
) -> None:
    cluster, config = sharing
    as_agent = subprocess.run(
        [cluster.cli, "queues", "add", "x"],
        env={**cluster.env, "RADIUM_CONFIG": str(config)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert as_agent.returncode == 1 and "needs a certificate of role admin" in as_agent.stderr
    assert cli(cluster, "queues", "add", "b", "--deserved", "1").returncode == 0
    for args, message in (
        (("add", "b"), "queue 'b' exists"),
        (("set", "nope", "--weight", "2"), "no queue 'nope'"),
        (("add", "c", "--deserved", "3", "--limit", "2"), "cannot deserve 3 GPUs"),
        (("add", "d", "--parent", "nowhere"), "no parent queue 'nowhere'"),
        (("rm", "nope"), "no queue 'nope' to remove"),
    ):
        failed = cli(cluster, "queues", *args)
        assert failed.returncode == 1 and message in failed.stderr, failed.stderr
        assert len(failed.stderr.strip().splitlines()) == 1, failed.stderr  # no traceback
    listed = queues(cluster)
    assert set(listed) == {"a", "b", "default"}
    assert listed["a"]["queue"]["deserved"] == 1 and listed["b"]["queue"]["deserved"] == 1
    assert cli(cluster, "queues", "set", "b", "--weight", "2").returncode == 0
    assert queues(cluster)["b"]["queue"] == {"name": "b", "deserved": 1, "weight": 2, "limit": -1}


def holder_of(cluster: PoolCluster, container: str) -> dict[str, object] | None:
    listed = json.loads(cli(cluster, "leases", "--all", "--json").stdout)
    found = [le for le in listed if le.get("holder") == f"sharenode/{container}"]
    return found[-1] if found else None


def test_a_queue_below_quota_reclaims_from_the_one_that_borrowed(
    sharing: tuple[PoolCluster, Path], sharing_dockerd: Dockerd, tmp_path: Path
) -> None:
    cluster, _ = sharing
    if "b" not in queues(cluster):
        assert cli(cluster, "queues", "add", "b", "--deserved", "1").returncode == 0
    signal_dir = tmp_path / "signal"
    signal_dir.mkdir()
    (signal_dir / "stop").write_text("go")
    started: dict[str, str] = {}
    # A takes both GPUs: half of one never preemptible, the other half and a whole one borrowed.
    for name, request in (
        ("build", ("RADIUM_FRACTION=0.5", "RADIUM_PRIORITY=build")),
        ("whole", ("RADIUM_GPUS=1", "RADIUM_PRIORITY=train")),
        ("half", ("RADIUM_FRACTION=0.5", "RADIUM_PRIORITY=train")),
    ):
        env = [arg for pair in ("RADIUM_QUEUE=a", *request[1:]) for arg in ("-e", pair)]
        done = radium_run(
            sharing_dockerd, request[0], "-d", *env, "-e", "RADIUM_REMOTE=numpy",
            "-v", f"{signal_dir}:/signal:ro", IMAGE, "python3", "-c", TRAIN,
        )  # fmt: skip
        started[name] = done.stdout.strip()
    try:
        for name, container in started.items():
            wait_until(lambda c=container: holder_of(cluster, c) is not None, 30, name)
        assert queues(cluster)["a"]["allocated"] == 2
        before = {le.id for le in cluster.client().leases()}

        # The pool restarts: no queue and no lease is lost.
        cluster.pool.kill(signal.SIGKILL)
        cluster.start_pool()
        cluster.wait_up("rdm-share")
        assert {le.id for le in cluster.client().leases()} == before
        assert set(queues(cluster)) == {"a", "b", "default"}

        # B asks for its quota: one whole GPU; it waits for A's borrowed whole GPU to be freed.
        b = radium_run(
            sharing_dockerd, "RADIUM_GPUS=1", "--rm", "-e", "RADIUM_QUEUE=b",
            "-e", f"RADIUM_WAIT={GRACE * 4}", "-e", "RADIUM_REMOTE=numpy", IMAGE,
            "python3", "-c", B_WORK,
        )  # fmt: skip
        assert b.stdout.strip() == "1.5", b.stderr

        victim = holder_of(cluster, started["whole"])
        assert victim is not None and victim["state"] == "preempted"
        assert victim["preempted_for"] == "b"
        wait_until(
            lambda: (
                sharing_dockerd.docker(
                    "inspect", "-f", "{{.State.Running}}", started["whole"]
                ).stdout.strip()
                == "false"
            ),
            60,
            "the preempted container to finish its program",
        )
        told = sharing_dockerd.docker("logs", started["whole"]).stdout.splitlines()
        assert told[0].startswith("PREEMPTED lease ") and "preempted for queue 'b'" in told[0]
        assert told[1].startswith("LEASE preempting lease ") and "for queue 'b'" in told[1]
        assert told[2] == "GONE WorkerGone", told

        # A's others were never told; they still compute. Then they stop on their own.
        (signal_dir / "stop").write_text("stop")
        for name in ("build", "half"):
            code = sharing_dockerd.docker("wait", started[name]).stdout.strip()
            out = sharing_dockerd.docker("logs", started[name]).stdout.splitlines()
            assert code == "0" and len(out) == 1 and out[0].startswith("CALLS "), (name, out)
            lease = holder_of(cluster, started[name])
            assert lease is not None and not lease.get("preempted_at"), lease
        table = cli(cluster, "leases", "--all").stdout
        assert "for b, " in table and "preempted" in table
    finally:
        for name, container in started.items():  # shown when the test fails
            logs = sharing_dockerd.docker("logs", container, check=False)
            print(f"--- {name}:", logs.stdout, logs.stderr)
            sharing_dockerd.docker("rm", "-f", container, check=False)
    wait_until(lambda: not cluster.client().leases(), 30, "every lease to end")
