"""`radium up`: pool + CPU acceptor in one command, usable at once, stopped cleanly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil

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
    assert not any(c.is_running() and c.status() != psutil.STATUS_ZOMBIE for c in children)
