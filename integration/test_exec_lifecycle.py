"""``radium exec`` as a user runs it, and what it leaves behind (issue 35, items 2, 3 and 7).

A private pool and CPU acceptor (no network namespace), a node agent autostarted by ``radium
exec`` itself, and the real ``radium`` entry point: an exec against a pool that is down leaves
no agent; ``radium down`` stops the agent of its instance; a ``kill -9``'d exec leaves no runtime
directory; a mistyped ``--remote`` name is refused before leasing (bad syntax) or said in one
line with the closest name the worker can import (and the lease is given back).
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from integration.pool import PoolCluster, serving, wait_until
from integration.radium_env import RadiumEnv
from integration.test_leases import agent_pid, stop_agent
from radium.agent import lockfile
from tests.ports import free_port

RADIUM_CLI = str(Path(sys.executable).parent / "radium")


def radium_cli(config: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "RADIUM_CONFIG": str(config)}
    return subprocess.run(
        [RADIUM_CLI, *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def lock_is_free(agent_dir: Path) -> bool:
    """Nobody holds the agent's lock (``radium up``'s agent could take it)."""
    lock = agent_dir / "state.lock"
    if not lock.exists():
        return True
    with open(lock, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(f, fcntl.LOCK_UN)
    return True


def exec_holders(config: Path) -> dict[str, str]:
    """``radium leases --all``: the state of each lease a ``radium exec`` held, by holder."""
    done = radium_cli(config, "leases", "--all", "--json")
    assert done.returncode == 0, done.stderr
    leases = json.loads(done.stdout)
    return {le["holder"]: le["state"] for le in leases if "/exec-" in le["holder"]}


def doctor_agent(config: Path) -> str:
    """``radium doctor``'s line about the agent."""
    doctor = radium_cli(config, "doctor")
    (line,) = [line for line in doctor.stdout.splitlines() if line.split()[1:2] == ["agent"]]
    return line


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PoolCluster]:
    with serving(tmp_path_factory.mktemp("exec-pool")) as cluster:
        yield cluster


@pytest.fixture
def config(radium: RadiumEnv, pool: PoolCluster, tmp_path: Path) -> Iterator[Path]:
    """A config reaching the pool through an agent of its own (autostarted), stopped after."""
    path = radium.client_config(f"exec-{tmp_path.name}.toml", pool.client_table(), tmp_path)
    try:
        yield path
    finally:
        stop_agent(path)


@pytest.mark.parametrize("pool_address", ["127.0.0.1:{port}", "no-such-pool.invalid:{port}"])
def test_an_exec_against_a_pool_that_is_down_leaves_no_agent(
    radium: RadiumEnv, tmp_path: Path, pool_address: str
) -> None:
    """Issue 35, item 2: the agent the exec started stayed, holding its lock (the next ``radium
    up`` failed) and its socket (``radium doctor`` said it answers)."""
    address = pool_address.format(port=free_port())
    client = f'[client]\npool = "{address}"\nleases = "{address}"\ntoken = "t"\ntimeout = 1\n'
    config = radium.client_config("dead-pool.toml", client, tmp_path)
    try:
        done = radium_cli(config, "exec", "--remote", "numpy", "--", "true")
        assert done.returncode != 0
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "Traceback" not in done.stderr
        wait_until(lambda: agent_pid(config) is None, 60, "the autostarted agent to exit")
        assert lock_is_free(tmp_path)
        assert not (tmp_path / "agent.sock").exists()
        assert "exits" in (tmp_path / "agent.log").read_text()  # it says why
    finally:
        stop_agent(config)


def test_radium_down_stops_the_agent_of_its_instance(
    radium: RadiumEnv, pool: PoolCluster, tmp_path: Path
) -> None:
    """Issue 35, item 2: an agent of an instance's config, started by ``radium exec`` (the pool
    answers, so it stays), is stopped by ``radium down``; ``radium doctor`` then says so."""
    state = tmp_path / "up"
    state.mkdir(mode=0o700)
    config = state / "config.toml"  # as `radium up` keeps it: the agent's files beside it
    config.write_text(
        radium.client_config(f"up-{tmp_path.name}.toml", pool.client_table(), state).read_text()
    )
    try:
        done = radium_cli(config, "exec", "--remote", "numpy", "--", "true")
        assert done.returncode == 0, done.stderr
        pid = agent_pid(config)
        assert pid is not None  # a reachable pool: the agent stays for the next exec
        assert f"answers at {state / 'agent.sock'}, pid {pid}, autostarted" in doctor_agent(config)
        down = radium_cli(config, "down", "--state-dir", str(state))
        assert down.returncode == 0, down.stderr
        assert "agent" in down.stdout
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"
        assert lock_is_free(state)
        assert "not running" in doctor_agent(config)
    finally:
        stop_agent(config)


def test_a_killed_exec_leaves_no_runtime_directory(
    radium: RadiumEnv, pool: PoolCluster, config: Path
) -> None:
    """Issue 35, item 3: ``kill -9`` of ``radium exec`` left its runtime directory, ``dp.sock``
    and a lease.json saying "active", although the agent released the lease."""
    env = {"PATH": os.environ["PATH"], "RADIUM_CONFIG": str(config)}
    exec_ = subprocess.Popen(
        [RADIUM_CLI, "exec", "--remote", "numpy", "--", "sleep", "600"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    runtime = radium.state_dir / f"exec-{os.uname().nodename}-{exec_.pid}"
    try:
        leased = lambda: any(radium.state_dir.glob(f"{runtime.name}-*/lease.json"))  # noqa: E731
        wait_until(leased, 60, "the exec's lease.json")
        (directory,) = radium.state_dir.glob(f"{runtime.name}-*")
        assert (directory / "dp.sock").exists()
        # The command it ran (sleep) is ours to end; the agent it autostarted is its child too.
        children = [c for c in psutil.Process(exec_.pid).children() if c.name() == "sleep"]
        exec_.kill()
        exec_.wait(timeout=30)
        for child in children:
            child.kill()
        wait_until(lambda: not directory.exists(), 30, f"{directory} removed by the agent")
        states = [s for h, s in exec_holders(config).items() if h.endswith(f"/{directory.name}")]
        assert states and "active" not in states
    finally:
        if exec_.poll() is None:
            exec_.kill()
        exec_.wait(timeout=30)
        exec_.stderr.close()  # type: ignore[union-attr]


def test_a_mistyped_remote_module_says_the_closest_name_and_gives_the_lease_back(
    radium: RadiumEnv, pool: PoolCluster, config: Path
) -> None:
    """Issue 35, item 7: ``--remote nmupy`` leased, ran the program, and failed inside it."""
    marker = radium.root / "ran"
    done = radium_cli(config, "exec", "--remote", "nmupy", "--", "touch", str(marker))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "radium: the worker cannot import 'nmupy' (did you mean 'numpy'?)"
    ]
    assert not marker.exists()  # the program never ran
    assert "active" not in exec_holders(config).values()


def test_a_remote_submodule_the_worker_lacks_names_its_siblings(
    radium: RadiumEnv, pool: PoolCluster, config: Path
) -> None:
    done = radium_cli(config, "exec", "--remote", "numpy.linalgg", "--", "true")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "radium: the worker cannot import 'numpy.linalgg' (did you mean 'numpy.linalg'?)"
    ]


@pytest.mark.parametrize("name", ["1bad", "numpy.", "a-b", "mod:1f", "mod:f:g"])
def test_a_remote_name_that_is_no_module_is_refused_before_leasing(
    radium: RadiumEnv, pool: PoolCluster, config: Path, name: str
) -> None:
    """Issue 35, item 7: ``--remote 1bad`` said "remoting is off" and ran the program anyway."""
    before = exec_holders(config)
    done = radium_cli(config, "exec", "--remote", name, "--", "true")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"radium: --remote {name!r} is neither a module nor module:function "
        "(a dotted Python name: numpy.linalg, or app.model:train_step)"
    ]
    assert agent_pid(config) is None  # nothing was asked of an agent: none was started
    assert exec_holders(config) == before


def test_radium_run_refuses_a_remote_name_that_is_no_module_before_docker(
    radium: RadiumEnv, tmp_path: Path
) -> None:
    env = {"PATH": str(tmp_path), "RADIUM_CONFIG": str(radium.config)}
    (tmp_path / "docker").write_text("#!/bin/sh\n/usr/bin/touch ran\n")  # would say it ran
    (tmp_path / "docker").chmod(0o755)
    done = subprocess.run(
        [RADIUM_CLI, "run", "--remote", "1bad", "--rm", "img", "true"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "radium: --remote '1bad' is neither a module nor module:function "
        "(a dotted Python name: numpy.linalg, or app.model:train_step)"
    ]
    assert not (tmp_path / "ran").exists()


def test_a_service_agent_takes_over_from_an_autostarted_one_and_its_leases(
    radium: RadiumEnv, pool: PoolCluster, config: Path, tmp_path: Path
) -> None:
    """Issue 35, item 2: ``radium up``'s agent found the lock of an agent ``radium exec`` had
    started and exited ("another agent is running"), so ``radium up`` failed. Now it stops
    that one and resumes its leases: a lease taken through the old agent is watched by the
    new one (a ``kill -9``'d exec is released and its directory removed)."""
    env = {"PATH": os.environ["PATH"], "RADIUM_CONFIG": str(config)}
    exec_ = subprocess.Popen(
        [RADIUM_CLI, "exec", "--remote", "numpy", "--", "sleep", "600"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    service: subprocess.Popen[bytes] | None = None
    try:
        prefix = f"exec-{os.uname().nodename}-{exec_.pid}-"
        leased = lambda: any(radium.state_dir.glob(f"{prefix}*/lease.json"))  # noqa: E731
        wait_until(leased, 60, "the exec's lease.json")
        (directory,) = radium.state_dir.glob(f"{prefix}*")
        autostarted = agent_pid(config)
        assert autostarted is not None
        with open(tmp_path / "service-agent.log", "wb") as log:
            service = subprocess.Popen([RADIUM_CLI, "agent"], env=env, stdout=log, stderr=log)
        holder = lambda: lockfile.holder(tmp_path / "state.lock")  # noqa: E731
        wait_until(lambda: holder() == service.pid, 30, "the service agent to take over")
        assert agent_pid(config) == service.pid
        assert (
            not psutil.pid_exists(autostarted) or psutil.Process(autostarted).status() == "zombie"
        )
        assert "active" in exec_holders(config).values()  # the lease lived through the change
        sleeper = [c for c in psutil.Process(exec_.pid).children() if c.name() == "sleep"]
        exec_.kill()
        exec_.wait(timeout=30)
        for child in sleeper:
            child.kill()
        wait_until(lambda: not directory.exists(), 30, f"{directory} removed by the new agent")
        assert service.poll() is None
    finally:
        if exec_.poll() is None:
            exec_.kill()
        exec_.wait(timeout=30)
        if service is not None and service.poll() is None:
            service.terminate()
            service.wait(timeout=30)


def test_radium_up_exec_down_exec_up_as_a_user_types_them(tmp_path: Path) -> None:
    """Issue 35, item 2, end to end: after ``radium down``, an exec (the pool is down) leaves
    an agent for a few seconds at most, and a ``radium up`` at once still comes up (its agent
    takes over from that one); ``radium doctor`` names radium up's agent, not the other."""
    state = tmp_path / "up"
    config = state / "config.toml"
    listen = f"127.0.0.1:{free_port()}"

    def up() -> None:
        done = radium_cli(config, "up", "--detach", "--state-dir", str(state), "--listen", listen)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("Radium is up"), done.stdout

    try:
        up()
        assert radium_cli(config, "exec", "--remote", "numpy", "--", "true").returncode == 0
        down = radium_cli(config, "down", "--state-dir", str(state))
        assert down.stdout == "Radium is down: stopped pool, acceptor, agent.\n", down.stderr
        failed = radium_cli(config, "exec", "--remote", "numpy", "--", "true")
        assert failed.returncode == 1 and len(failed.stderr.splitlines()) == 1, failed.stderr
        autostarted = lockfile.holder(state / "agent-state.lock")
        assert autostarted is not None and lockfile.autostarted(autostarted)
        up()  # within the autostarted agent's grace: it must not make this fail
        ours = lockfile.holder(state / "agent-state.lock")
        assert ours not in (None, autostarted) and not lockfile.autostarted(ours)
        assert f"pid {ours}" in doctor_agent(config) and "autostarted" not in doctor_agent(config)
    finally:
        radium_cli(config, "down", "--state-dir", str(state))
    wait_until(lambda: lockfile.holder(state / "agent-state.lock") is None, 30, "no agent")
