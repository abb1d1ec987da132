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
