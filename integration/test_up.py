"""`radium up`: pool + CPU acceptor in one command, usable at once, stopped cleanly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil

from integration.host import running
from integration.pool import free_port, wait_until
from radium import config as config_module


def test_radium_up_serves_and_stops_cleanly(tmp_path: Path) -> None:
    cli = str(Path(sys.executable).parent / "radium")
    listen = f"127.0.0.1:{free_port()}"
    up = subprocess.Popen(
        [cli, "up", "--state-dir", str(tmp_path), "--listen", listen, "--cpu-devices", "3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"PATH": os.environ["PATH"]},
    )
    try:
        assert up.stdout is not None
        first = up.stdout.readline()
        assert first.startswith(
            f"Radium is up: pool at {listen}, acceptor 'local' with 3 devices"
        ), first + up.stderr.read() if up.poll() is not None else first
        children = psutil.Process(up.pid).children()
        assert len(children) == 3
        wait_until((tmp_path / "agent.sock").exists, 10, "the agent's socket")
        env = {"PATH": os.environ["PATH"], "RADIUM_CONFIG": str(tmp_path / "config.toml")}
        status = json.loads(
            subprocess.run(
                [cli, "status", "--json"], env=env, capture_output=True, text=True, check=True
            ).stdout
        )
        assert [(a["name"], a["up"]) for a in status["acceptors"]] == [("local", True)]
        assert (tmp_path / "config.toml").stat().st_mode & 0o777 == 0o600
    finally:
        up.send_signal(signal.SIGTERM)
        assert up.wait(timeout=30) == 0
    assert not any(map(running, children))


def start_up(state: Path, *extra: str, listen: str = "") -> subprocess.Popen[str]:
    """`radium up` on ``state``, its pool on ``listen`` (a free loopback port by default)."""
    cli = str(Path(sys.executable).parent / "radium")
    listen = listen or f"127.0.0.1:{free_port()}"
    return subprocess.Popen(
        [cli, "up", "--state-dir", str(state), "--listen", listen, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"PATH": os.environ["PATH"]},
    )


def test_services_die_with_a_radium_up_killed_outright(tmp_path: Path) -> None:
    up = start_up(tmp_path)
    try:
        assert up.stdout is not None
        assert up.stdout.readline().startswith("Radium is up"), up.stderr
        services = psutil.Process(up.pid).children()
        assert len(services) == 3
    finally:
        up.kill()  # SIGKILL: no chance to stop anything itself
        up.wait()
    wait_until(lambda: not any(map(running, services)), 30, "the services to follow radium up")
    again = start_up(tmp_path)  # the state directory is free again: a clean start
    try:
        assert again.stdout is not None
        assert again.stdout.readline().startswith("Radium is up"), again.stderr
    finally:
        again.send_signal(signal.SIGTERM)
        assert again.wait(timeout=30) == 0


def test_a_second_radium_up_on_a_busy_state_dir_names_the_holders(tmp_path: Path) -> None:
    cli = str(Path(sys.executable).parent / "radium")
    first = start_up(tmp_path, "--detach")
    assert first.wait(timeout=90) == 0, first.stderr.read() if first.stderr else ""
    pids = json.loads((tmp_path / "pids.json").read_text())
    try:
        second = start_up(tmp_path)
        assert second.wait(timeout=30) == 1
        assert second.stderr is not None
        expected = ", ".join(f"{name} (pid {pids[name]})" for name in ("pool", "acceptor", "agent"))
        assert second.stderr.read().strip().splitlines() == [
            f"radium: Radium is already up in {tmp_path}: held by {expected}; "
            f"radium down --state-dir {tmp_path}"
        ]
        assert all(psutil.pid_exists(pid) for pid in pids.values())  # untouched
    finally:
        down = subprocess.run(
            [cli, "down", "--state-dir", str(tmp_path)],
            capture_output=True,
            text=True,
            env={"PATH": os.environ["PATH"]},
        )
    assert down.returncode == 0, down.stderr
    assert not any(psutil.pid_exists(pid) for pid in pids.values())


APP = (
    "import numpy as np\n"
    "a = np.random.rand(300, 300)\n"
    'print("inverse ok:", np.allclose(np.linalg.inv(a) @ a, np.eye(300)))\n'
)


def radium(*argv: str, config: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``radium ARGV`` as a user runs it, with ``RADIUM_CONFIG`` when ``config`` is given."""
    cli = str(Path(sys.executable).parent / "radium")
    env = {"PATH": os.environ["PATH"], **({"RADIUM_CONFIG": str(config)} if config else {})}
    return subprocess.run([cli, *argv], env=env, capture_output=True, text=True, timeout=300)


def processes_of(root: Path) -> list[str]:
    """Processes still running with a config under ``root`` (services, agents, workers)."""
    found = []
    for process in psutil.process_iter():
        try:
            if str(root) in process.environ().get("RADIUM_CONFIG", ""):
                found.append(f"{process.pid} {' '.join(process.cmdline())}")
        except psutil.Error:
            continue
    return found


def test_two_radium_up_in_other_state_dirs_run_side_by_side_and_each_serves_its_exec(
    tmp_path: Path,
) -> None:
    # Neither is told which ports to take: the second finds the first's taken and picks others.
    states = [tmp_path / "one", tmp_path / "two"]
    (tmp_path / "app.py").write_text(APP)
    started: list[Path] = []
    try:
        for state in states:
            up = radium("up", "--detach", "--state-dir", str(state))
            assert up.returncode == 0, up.stdout + up.stderr
            started.append(state)
            assert up.stdout.startswith("Radium is up: pool at "), up.stdout
            assert f"export RADIUM_CONFIG={state / 'config.toml'}" in up.stdout
        configs = [config_module.load(state / "config.toml") for state in states]
        taken = [
            {c.pool.listen, c.pool.lease_listen, c.pool.metrics, c.acceptor.metrics,
             c.agent.metrics, c.agent.socket, c.agent.state_file, c.acceptor.state_dir}
            for c in configs
        ]  # fmt: skip
        assert not taken[0] & taken[1], taken
        for state in states:
            done = radium(
                "exec", "--remote", "numpy", "--", "/usr/bin/python3", str(tmp_path / "app.py"),
                config=state / "config.toml",
            )  # fmt: skip
            assert (done.returncode, done.stdout) == (0, "inverse ok: True\n"), done.stderr
        for state in states:  # each exec leased from its own pool
            listed = radium("leases", "--all", "--json", config=state / "config.toml")
            leases = json.loads(listed.stdout)
            assert [lease["state"] for lease in leases] == ["released"], leases
    finally:
        downs = [radium("down", "--state-dir", str(state)) for state in started]
    assert [(d.returncode, d.stderr) for d in downs] == [(0, "")] * 2
    assert [d.stdout for d in downs] == ["Radium is down: stopped pool, acceptor, agent.\n"] * 2
    assert processes_of(tmp_path) == []


def test_a_later_radium_up_keeps_the_users_edits_to_its_config(tmp_path: Path) -> None:
    state = tmp_path / "state"
    path = state / "config.toml"
    try:
        first = radium("up", "--detach", "--state-dir", str(state))
        assert first.returncode == 0, first.stderr
        assert radium("down", "--state-dir", str(state)).returncode == 0
        edited = (
            path.read_text().replace("cpu_devices = 2", "cpu_devices = 3  # mine")
            + "\n# my own table\n[acceptor.sandbox]\ntmp_mib = 512\n"
        )
        path.write_text(edited)
        again = radium("up", "--detach", "--state-dir", str(state))
        assert again.returncode == 0, again.stderr
        assert "acceptor 'local' with 3 devices" in again.stdout
        assert path.read_text() == edited  # nothing was missing: not written again
        status = radium("status", "--json", config=path)  # the tokens did not change
        assert status.returncode == 0, status.stderr
        assert len(json.loads(status.stdout)["devices"]) == 3
    finally:
        radium("down", "--state-dir", str(state))
    assert processes_of(tmp_path) == []


def in_private_default_dirs(script: str) -> subprocess.CompletedProcess[str]:
    """``script`` (sh) as root with a fresh, empty /var/lib/radium (where ``radium up`` keeps
    its state by default) and /etc/radium (no system config), and its own loopback: a mount
    and network namespace of its own, so this machine's default `radium up` is never touched."""
    prologue = (
        "set -eu\nmount --make-rprivate /\nmkdir -p /var/lib/radium\n"
        "mount -t tmpfs radium-test /var/lib/radium\n"
        "if [ -d /etc/radium ]; then mount -t tmpfs radium-test /etc/radium; fi\n"
        "ip link set lo up\n"
    )
    env = {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    return subprocess.run(
        ["unshare", "--mount", "--net", "sh", "-c", prologue + script],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_after_radium_up_detach_every_command_finds_it_with_no_export(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(APP)
    done = in_private_default_dirs(
        "radium up --detach >/dev/null\n"
        "trap 'radium down >/dev/null' EXIT\n"
        "cat /var/lib/radium/up/pids.json\necho\necho ---\n"
        "radium status --json\necho ---\nradium doctor --json || true\necho ---\n"
        f"radium exec --remote numpy -- /usr/bin/python3 {tmp_path / 'app.py'}\n"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    pids, status, doctor, app = done.stdout.split("---\n")
    assert [(a["name"], a["up"]) for a in json.loads(status)["acceptors"]] == [("local", True)]
    checks = {check["name"]: check for check in json.loads(doctor)}
    assert checks["pool"]["status"] == "ok", checks["pool"]
    agent = json.loads(pids)["agent"]  # doctor names the process: radium up's own agent
    assert checks["agent"]["detail"] == f"answers at /var/lib/radium/up/agent.sock, pid {agent}"
    assert app == "inverse ok: True\n"
    assert sorted(json.loads(pids)) == ["acceptor", "agent", "pool"]
    assert not any(psutil.pid_exists(pid) for pid in json.loads(pids).values())


def test_doctor_names_the_export_for_a_radium_up_it_did_not_find(tmp_path: Path) -> None:
    state = tmp_path / "elsewhere"
    done = in_private_default_dirs(
        f"radium up --detach --state-dir {state} >/dev/null\n"
        f"trap 'radium down --state-dir {state} >/dev/null' EXIT\n"
        "radium doctor --json || true\n"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    pool = {check["name"]: check for check in json.loads(done.stdout)}["pool"]
    assert pool["status"] == "FAIL" and "token not accepted (no token)" in pool["detail"]
    exports, _, why = pool["fix"].partition(" (")
    assert f"export RADIUM_CONFIG={state / 'config.toml'}" in exports.split(" or "), pool
    assert why == "radium up runs there; this command read /etc/radium/config.toml)"
    assert processes_of(state) == []


def test_the_demo_runs_beside_another_radium_up(tmp_path: Path) -> None:
    # The Quickstart's `radium up` holds the well-known ports (when they were free).
    state = tmp_path / "quickstart"
    up = radium("up", "--detach", "--state-dir", str(state))
    assert up.returncode == 0, up.stderr
    try:
        demo = subprocess.run(
            [sys.executable, str(Path(__file__).resolve().parent.parent / "scripts" / "demo.py")],
            env={"PATH": os.environ["PATH"]}, capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        assert demo.returncode == 0, demo.stdout + demo.stderr[-3000:]
        assert "np.allclose(np.linalg.inv(a) @ a, np.eye(1500)) = True" in demo.stdout
        assert "Traceback" not in demo.stderr
        status = radium("status", "--json", config=state / "config.toml")  # still serving
        assert json.loads(status.stdout)["acceptors"][0]["up"], status.stderr
    finally:
        down = radium("down", "--state-dir", str(state))
    assert down.returncode == 0, down.stderr
    assert processes_of(tmp_path) == []


def test_a_radium_up_on_anothers_address_is_one_line_and_leaves_it_serving(
    tmp_path: Path,
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    up = radium("up", "--detach", "--state-dir", str(first))
    assert up.returncode == 0, up.stderr
    try:
        listen = config_module.load(first / "config.toml").pool.listen
        # gRPC listens with SO_REUSEPORT: a second pool there would share the port unnoticed.
        clash = radium("up", "--detach", "--state-dir", str(second), "--listen", listen)
        assert (clash.returncode, clash.stdout) == (1, "")
        assert clash.stderr.splitlines() == [
            f"radium: {listen} (pool.listen in {second / 'config.toml'}) is in use: another "
            "radium up, or another program, listens there; stop it, or give radium up another "
            "--listen (its lease socket takes the next port)"
        ]
        assert not (second / "pids.json").exists()
        status = radium("status", "--json", config=first / "config.toml")
        assert json.loads(status.stdout)["acceptors"][0]["up"], status.stderr
    finally:
        down = radium("down", "--state-dir", str(first))
    assert down.returncode == 0, down.stderr
    assert processes_of(tmp_path) == []
