"""Containers get leases through the node agent, and the leases always come back."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from integration import images, runc
from integration.conftest import Rootfs
from integration.dockerd import Dockerd
from integration.host import running
from integration.pool import PoolCluster, wait_until
from integration.radium_env import RadiumEnv
from radium.agent import nativeclient

IMAGE = "radium-test/bookworm:leases"


@pytest.fixture(scope="module")
def leasing(
    radium: RadiumEnv, pool_store: list[str] | None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[PoolCluster, Path]]:
    """A pool on each store in turn with one 2-device CPU acceptor, and a Radium config whose
    hook leases from it."""
    root = tmp_path_factory.mktemp("leasing")
    # On etcd, two replicas: the failover test kills the leader.
    cluster = PoolCluster(root, lease_ttl=3, etcd=pool_store, replicas=2 if pool_store else 1)
    cluster.start_pool()
    cluster.start_acceptor("leases-acc", devices=2)
    cluster.wait_up("leases-acc")
    config = radium.client_config(
        "leasing.toml", cluster.client_table(), root / "agent", node="testnode"
    )
    try:
        yield cluster, config
    finally:
        stop_agent(config)
        cluster.stop()


def agent_pid(config: Path) -> int | None:
    needle = str(config)
    for process in psutil.process_iter(["cmdline", "environ"]):
        try:
            cmdline = process.info["cmdline"] or []
            environ = process.info["environ"] or {}
        except psutil.Error:
            continue
        if cmdline[-1:] == ["agent"] and environ.get("RADIUM_CONFIG") == needle:
            return int(process.pid)
    return None


def stop_agent(config: Path) -> None:
    pid = agent_pid(config)
    if pid:
        os.kill(pid, signal.SIGTERM)
        wait_until(lambda: agent_pid(config) is None, 10, "the agent to stop")


def radium_run(
    daemon: Dockerd, request: str, *args: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """``docker run --network none --runtime=radium -e REQUEST ARGS...``."""
    return daemon.docker(
        "run", "--network", "none", "--runtime=radium", "-e", request, *args, check=check
    )


def holders(cluster: PoolCluster) -> set[str]:
    return {le.holder for le in cluster.client().leases()}


@contextlib.contextmanager
def radium_dockerd(radium: RadiumEnv, config: Path, image: str) -> Iterator[Dockerd]:
    """dockerd with the radium runtime using ``config``, Debian bookworm imported as ``image``."""
    daemon = Dockerd({"radium": radium.runtime}, radium.environ(config))
    try:
        daemon.start()
        daemon.import_image(images.debian_tar("bookworm"), image)
        yield daemon
    finally:
        daemon.stop()


@pytest.fixture(scope="module")
def leasing_dockerd(radium: RadiumEnv, leasing: tuple[PoolCluster, Path]) -> Iterator[Dockerd]:
    with radium_dockerd(radium, leasing[1], IMAGE) as daemon:
        yield daemon


def test_container_holds_a_lease_while_it_runs(
    leasing: tuple[PoolCluster, Path], leasing_dockerd: Dockerd
) -> None:
    cluster, _ = leasing
    started = radium_run(
        leasing_dockerd,
        "RADIUM_GPUS=1",
        "-d",
        IMAGE,
        "sh",
        "-c",
        "cat /run/radium/lease.json; sleep 5",
    )
    container = started.stdout.strip()
    try:
        wait_until(lambda: f"testnode/{container}" in holders(cluster), 10, "the container's lease")
        time.sleep(4)  # longer than the 3 s TTL: the agent keeps it alive
        assert f"testnode/{container}" in holders(cluster)
        assert leasing_dockerd.docker("wait", container).stdout.strip() == "0"
        lease = json.loads(leasing_dockerd.docker("logs", container).stdout)
        assert lease["holder"] == f"testnode/{container}"
        assert lease["acceptor"] == "leases-acc" and lease["devices"]
        assert "credential" not in lease  # the container gets no secret
    finally:
        leasing_dockerd.docker("rm", "-f", container, check=False)
    wait_until(
        lambda: f"testnode/{container}" not in holders(cluster), 5, "the lease to be released"
    )
    ended = {le.holder: le.state for le in cluster.client().leases(all_=True)}
    assert ended[f"testnode/{container}"] == "released"


def test_no_capacity_fails_the_start_with_the_pools_reason(
    leasing: tuple[PoolCluster, Path], leasing_dockerd: Dockerd, radium: RadiumEnv
) -> None:
    result = radium_run(leasing_dockerd, "RADIUM_GPUS=3", "--rm", IMAGE, "true", check=False)
    assert result.returncode != 0
    assert "no capacity for 3 whole GPUs" in result.stderr
    assert list(radium.state_dir.iterdir()) == []


def start_socket_of(config: Path) -> str:
    from radium import agentprotocol
    from radium import config as config_module

    return agentprotocol.start_socket(config_module.load(config).agent.socket)


def ensure_agent(config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from radium import agentclient
    from radium import config as config_module

    monkeypatch.setenv("RADIUM_CONFIG", str(config))  # what the hook has: the agent inherits it
    agentclient.ensure_running(config_module.load(config))


def test_a_leased_container_starts_through_the_agents_start_socket(
    leasing: tuple[PoolCluster, Path],
    leasing_dockerd: Dockerd,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cluster, config = leasing
    ensure_agent(config, monkeypatch)
    script = (
        "python3 -c 'import radium_interposer; print(radium_interposer.__file__)'; "
        "cat /run/radium/lease.json; sleep 2"
    )
    container = radium_run(
        leasing_dockerd, "RADIUM_GPUS=1", "-d", IMAGE, "sh", "-c", script
    ).stdout.strip()
    try:
        (spec_file,) = (leasing_dockerd.root / "x").glob(f"**/{container}/config.json")
        hooks = json.loads(spec_file.read_text())["hooks"]
        for stage in ("prestart", "poststop"):
            # The agent's thin hook (the native client: scripts/setup built it), with the full
            # one as its fallback (docker adds its own libnetwork-setkey prestart hook).
            (args,) = [h["args"] for h in hooks[stage] if "radium" in " ".join(h["args"])]
            assert args[0].endswith(f"/{nativeclient.NAME}")
            assert args[1:4] == ["--socket", start_socket_of(config), stage]
            assert args[4] == "--" and args[-2:] == [
                f"{os.path.dirname(args[0])}/radium-hook",
                stage,
            ]
        assert leasing_dockerd.docker("wait", container).stdout.strip() == "0"
        interposer, lease_json = leasing_dockerd.docker("logs", container).stdout.split("\n", 1)
        assert interposer.startswith("/usr/lib/radium/")
        assert json.loads(lease_json)["holder"] == f"testnode/{container}"
    finally:
        leasing_dockerd.docker("rm", "-f", container, check=False)
    from radium import config as config_module

    agent_log = Path(config_module.load(config).agent.log_file).read_text()
    assert f"container {container}: started through the agent" in agent_log
    assert f"bundle {spec_file.parent}: Radium hooks and annotations added" in agent_log
    wait_until(lambda: f"testnode/{container}" not in holders(cluster), 5, "the lease back")


def test_a_start_the_agent_cannot_finish_says_why_and_keeps_nothing(
    leasing: tuple[PoolCluster, Path],
    leasing_dockerd: Dockerd,
    radium: RadiumEnv,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    cluster, config = leasing
    ensure_agent(config, monkeypatch)
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("the image puts a file where the bundle goes\n")
    before = holders(cluster)
    result = radium_run(
        leasing_dockerd, "RADIUM_GPUS=1", "--rm", "-v", f"{blocker}:/usr/lib/radium:ro",
        IMAGE, "true", check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert "/usr/lib/radium exists in the image but is not a directory" in result.stderr
    assert "Traceback" not in result.stderr
    assert holders(cluster) == before  # the lease taken for it was given back
    assert list(radium.state_dir.iterdir()) == []


def test_a_hook_whose_agent_died_after_create_falls_back_to_the_full_hook(
    leasing: tuple[PoolCluster, Path],
    radium: RadiumEnv,
    rootfs: Rootfs,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cluster, config = leasing
    ensure_agent(config, monkeypatch)
    bundle = runc.make_bundle(
        tmp_path, rootfs.get("bookworm"), ["sleep", "30"], [], {"radium.io/gpus": "1"}
    )
    call = radium.runtime.parent / "radium-agent-call"
    subprocess.run(
        [sys.executable, "-I", "-S", str(call), "--config", str(config), "create", str(bundle)],
        check=True, timeout=30,
    )  # fmt: skip
    pid = agent_pid(config)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)  # between create and prestart
    wait_until(lambda: agent_pid(config) is None, 10, "the agent to die")
    state_root = radium.root / "runc-root"
    subprocess.run(
        ["runc", "--root", str(state_root), "run", "-d", "--bundle", str(bundle), bundle.name],
        env=radium.environ(config), check=True, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60,
    )  # fmt: skip
    try:
        # The full hook started a new agent and took the lease through it.
        wait_until(lambda: f"testnode/{bundle.name}" in holders(cluster), 10, "the lease")
        assert agent_pid(config) is not None
        assert (radium.state_dir / bundle.name / "lease.json").exists()
    finally:
        subprocess.run(
            ["runc", "--root", str(state_root), "delete", "--force", bundle.name],
            capture_output=True,
        )
    wait_until(lambda: f"testnode/{bundle.name}" not in holders(cluster), 5, "the lease back")


def test_lease_released_when_the_container_dies_without_poststop(
    leasing: tuple[PoolCluster, Path], radium: RadiumEnv, rootfs: Rootfs, tmp_path: Path
) -> None:
    cluster, config = leasing
    bundle = runc.make_bundle(
        tmp_path, rootfs.get("bookworm"), ["sleep", "60"], [], {"radium.io/fraction": "0.5"}
    )
    state_root = radium.root / "runc-root"
    subprocess.run(
        [
            str(radium.runtime),
            "--root",
            str(state_root),
            "run",
            "-d",
            "--bundle",
            str(bundle),
            bundle.name,
        ],
        env=radium.environ(config),
        check=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=60,
    )
    try:
        state = json.loads(
            subprocess.run(
                ["runc", "--root", str(state_root), "state", bundle.name],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        wait_until(lambda: f"testnode/{bundle.name}" in holders(cluster), 10, "the lease")
        os.kill(state["pid"], signal.SIGKILL)  # no runc delete, so no poststop hook
        wait_until(
            lambda: f"testnode/{bundle.name}" not in holders(cluster), 5, "the agent to notice"
        )
    finally:
        subprocess.run(
            ["runc", "--root", str(state_root), "delete", "--force", bundle.name],
            capture_output=True,
        )


def test_agent_restart_keeps_leases_and_agent_death_lets_them_expire(
    leasing: tuple[PoolCluster, Path], leasing_dockerd: Dockerd
) -> None:
    cluster, config = leasing
    container = radium_run(
        leasing_dockerd, "RADIUM_FRACTION=0.25", "-d", IMAGE, "sleep", "60"
    ).stdout.strip()
    holder = f"testnode/{container}"
    try:
        wait_until(lambda: holder in holders(cluster), 10, "the lease")
        pid = agent_pid(config)
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        subprocess.Popen(
            [cluster.cli, "agent"],
            env={"PATH": os.environ["PATH"], "RADIUM_CONFIG": str(config)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        time.sleep(7)  # two TTLs: only a resumed agent keeps the lease alive
        assert holder in holders(cluster)
        pid = agent_pid(config)
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: holder not in holders(cluster), 8, "the lease to expire")
        assert {le.holder: le.state for le in cluster.client().leases(all_=True)}[
            holder
        ] == "expired"
    finally:
        leasing_dockerd.docker("rm", "-f", container, check=False)


def shims(daemon: Dockerd) -> dict[int, str]:
    """Live (not zombie) containerd shims of this dockerd, with their command lines."""
    found = {}
    for process in psutil.process_iter(["name", "cmdline", "status"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if (
            process.info["name"] == "containerd-shim"
            and process.info["status"] != psutil.STATUS_ZOMBIE
            and str(daemon.root) in cmdline
        ):
            found[process.pid] = cmdline
    return found


def test_300_containers_killed_leave_no_lease_and_no_process(
    leasing: tuple[PoolCluster, Path], leasing_dockerd: Dockerd, radium: RadiumEnv
) -> None:
    cluster, _ = leasing
    wait_until(lambda: not shims(leasing_dockerd), 60, "shims of earlier tests to exit")
    started: list[str] = []
    inits: list[psutil.Process] = []  # each container's own init: `sleep 60`
    for i in range(300):
        container = radium_run(
            leasing_dockerd, "RADIUM_FRACTION=0.01", "-d", "--rm", IMAGE, "sleep", "60"
        ).stdout.strip()
        started.append(container)
        pid = int(leasing_dockerd.docker("inspect", "-f", "{{.State.Pid}}", container).stdout)
        with contextlib.suppress(psutil.Error):  # pid 0, or gone already: nothing to leak
            inits.append(psutil.Process(pid))  # with its start time: a reused pid is not it
        if i % 2:
            leasing_dockerd.docker("kill", container, check=False)
        elif pid:
            os.kill(pid, signal.SIGKILL)
    wait_until(
        lambda: not leasing_dockerd.docker("ps", "-aq").stdout.split(), 120, "every container gone"
    )
    wait_until(
        lambda: not any(h.startswith("testnode/") for h in holders(cluster)), 30, "every lease back"
    )
    ended = {le.holder: le.state for le in cluster.client().leases(all_=True)}
    assert all(ended.get(f"testnode/{c}") == "released" for c in started)
    assert list(radium.state_dir.iterdir()) == []
    # A process still exiting is a race; one still there after this long is a leak.
    wait_until(lambda: not any(map(running, inits)), 30, "every container's init to be gone")
    wait_until(lambda: not shims(leasing_dockerd), 60, "every container's shim to exit")


def test_containers_starting_as_the_pool_fails_over_start_or_fail_with_one_line(
    leasing: tuple[PoolCluster, Path], leasing_dockerd: Dockerd
) -> None:
    """SIGKILL the leading pool while containers start: on etcd the standby takes over, on
    SQLite the pool is restarted. Each start either succeeds or fails with one line saying why;
    every lease comes back, none is granted twice, and starts succeed again after."""
    cluster, _ = leasing
    results: list[subprocess.CompletedProcess[str]] = []

    def start_some() -> None:
        for _ in range(5):
            results.append(
                radium_run(
                    leasing_dockerd, "RADIUM_FRACTION=0.05", "--rm", IMAGE, "true", check=False
                )
            )

    starters = [threading.Thread(target=start_some) for _ in range(3)]
    for thread in starters:
        thread.start()
    try:
        time.sleep(1.5)  # containers are starting
        old = cluster.leader()
        old.kill()
        if len(cluster.replicas) == 1:  # SQLite: the pool comes back on the same address
            old.start()
        probe, took = cluster.allocate_until_granted()
        print(f"\nfirst grant {took:.2f}s after the leader's SIGKILL")
        client = cluster.client()
        status = client.status()
        assert all(d.allocated_fraction <= 1 + 1e-9 for d in status.devices)  # none twice
        client.release(probe.id)
    finally:
        for thread in starters:
            thread.join(timeout=120)
    if len(cluster.replicas) > 1:
        old.start()  # back, as a standby
        cluster.wait_standing_by(old)
    assert len(results) == 15
    failed = [r for r in results if r.returncode != 0]
    for result in failed:
        assert "Traceback" not in result.stderr, result.stderr
        lines = [line for line in result.stderr.splitlines() if "radium" in line]
        assert len(lines) == 1, result.stderr
        # The pool was unreachable, or it was back before the acceptor had registered again.
        assert "pool" in lines[0] or "no matching acceptor is up" in lines[0], result.stderr
    said = next((line for r in failed for line in r.stderr.splitlines() if "radium" in line), "")
    print(f"{len(results) - len(failed)} of {len(results)} starts succeeded across the failover")
    print(f"a failed start said: {said}")
    assert (
        radium_run(leasing_dockerd, "RADIUM_FRACTION=0.05", "--rm", IMAGE, "true").returncode == 0
    )
    wait_until(
        lambda: not any(h.startswith("testnode/") for h in holders(cluster)), 30, "every lease back"
    )


def test_garbage_on_the_agent_socket(
    leasing: tuple[PoolCluster, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket as socket_module

    from radium import agentclient
    from radium import config as config_module

    _, config = leasing
    monkeypatch.setenv("RADIUM_CONFIG", str(config))  # what the hook has: the agent inherits it
    settings = config_module.load(config)
    agentclient.ensure_running(settings)
    for payload in (
        b"\x00\xff" * 100 + b"\n",
        b"[1,2]\n",
        b'{"op": "acquire"}\n',
        b"x" * 100_000,
        b"",
    ):
        with socket_module.socket(socket_module.AF_UNIX) as s:
            s.settimeout(15)
            s.connect(settings.agent.socket)
            s.sendall(payload)
            s.shutdown(socket_module.SHUT_WR)
            reply = s.recv(65536)
        if payload:
            assert json.loads(reply)["ok"] is False
    assert agentclient.call(settings.agent.socket, {"op": "ping"}) == {"ok": True}
