"""``radium up``: the embedded default — pool, CPU acceptor and node agent on this machine.

It keeps its own config (generated tokens, database, slots, agent socket) in a state directory,
supervises the three services as child processes, and stops them on Ctrl-C or SIGTERM; with
``--detach`` it returns once they are ready, and ``radium down`` stops them. Other
radium commands, and an engine's radium runtime, use them when pointed at that config
(``export RADIUM_CONFIG=...`` as it prints).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TextIO

import psutil

from radium import config as config_module
from radium.errors import RadiumError
from radium.poolclient import PoolClient

STOP_GRACE = 10.0


def default_state_dir() -> Path:
    if os.geteuid() == 0:
        return Path("/var/lib/radium/up")
    return (
        Path(os.environ.get("XDG_STATE_HOME", Path.home() / ".local" / "state")) / "radium" / "up"
    )


def write_config(state: Path, listen: str, cpu_devices: int) -> Path:
    """The config of this embedded pool; tokens are generated once and kept (0600)."""
    state.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = state / "config.toml"
    previous = config_module.load(path).pool if path.exists() else None
    agent = (
        previous.agent_tokens[0]
        if previous and previous.agent_tokens
        else secrets.token_urlsafe(24)
    )
    acceptor = (
        previous.acceptor_tokens[0]
        if previous and previous.acceptor_tokens
        else secrets.token_urlsafe(24)
    )
    text = (
        "# Written by `radium up`; its tokens are kept between runs.\n"
        f'[pool]\nlisten = "{listen}"\ndb = "{state / "pool.db"}"\n'
        f'agent_tokens = ["{agent}"]\nacceptor_tokens = ["{acceptor}"]\n'
        f'[client]\npool = "{listen}"\ntoken = "{agent}"\n'
        f'[acceptor]\nname = "local"\npool = "{listen}"\ntoken = "{acceptor}"\nbackend = "auto"\n'
        f'cpu_devices = {cpu_devices}\nstate_dir = "{state / "acceptor"}"\n'
        # Port 0: the acceptor listens on a free port and registers the one it got.
        'data_address = "127.0.0.1:0"\n'
        f'[agent]\nenabled = true\nsocket = "{state / "agent.sock"}"\n'
        f'state_file = "{state / "agent-state.json"}"\nlog_file = "{state / "agent.log"}"\n'
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


def _check_alive(children: dict[str, subprocess.Popen[bytes]], state: Path) -> None:
    for service, child in children.items():
        if child.poll() is not None:
            raise RadiumError(
                f"radium {service} exited with {child.returncode}",
                hint=f"see {state}/{service}.log",
            )


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _wait_ready(
    client: PoolClient, children: dict[str, subprocess.Popen[bytes]], state: Path, timeout: float
) -> int:
    """The number of devices, once the pool answers and the acceptor is registered."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _check_alive(children, state)
        try:
            status = client.status()
        except RadiumError:
            status = None
        # This run's acceptor, not the record a restarted pool loaded from its database.
        address = _read(state / "acceptor" / "data_address")
        if status is not None and any(a.up and a.data_address == address for a in status.acceptors):
            return len(status.devices)
        time.sleep(0.2)
    raise RadiumError(
        f"the pool and acceptor did not come up within {timeout:g}s",
        hint=f"see the logs in {state}",
    )


def _stop(children: dict[str, subprocess.Popen[bytes]]) -> None:
    for child in reversed(list(children.values())):
        if child.poll() is None:
            child.terminate()
    deadline = time.monotonic() + STOP_GRACE
    for child in children.values():
        try:
            child.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


PIDS = "pids.json"


def _running(state: Path) -> dict[str, int]:
    """The services a detached ``radium up`` left running in ``state`` (checked, not trusted)."""
    try:
        pids = json.loads((state / PIDS).read_text())
    except (OSError, ValueError):
        return {}
    alive = {}
    for service, pid in pids.items() if isinstance(pids, dict) else []:
        try:
            cmdline = psutil.Process(int(pid)).cmdline()
        except (psutil.Error, ValueError):
            continue
        if service in cmdline and any(part.endswith("radium") for part in cmdline):
            alive[service] = int(pid)
    return alive


def down(state: Path, out: TextIO = sys.stdout) -> int:
    """Stop what ``radium up --detach`` started in ``state``."""
    running = _running(state)
    if not running:
        raise RadiumError(f"Radium is not up in {state}", hint="radium up --detach starts it")
    processes = []
    for pid in reversed(list(running.values())):
        with contextlib.suppress(psutil.Error):
            process = psutil.Process(pid)
            process.terminate()
            processes.append(process)
    _, left = psutil.wait_procs(processes, timeout=STOP_GRACE)
    for process in left:
        with contextlib.suppress(psutil.Error):
            process.kill()
    (state / PIDS).unlink(missing_ok=True)
    out.write(f"Radium is down: stopped {', '.join(running)}.\n")
    return 0


def run(
    state: Path, listen: str, cpu_devices: int, out: TextIO = sys.stdout, detach: bool = False
) -> int:
    if _running(state):
        raise RadiumError(
            f"Radium is already up in {state}", hint=f"radium down --state-dir {state}"
        )
    config = write_config(state, listen, cpu_devices)
    (state / "acceptor" / "data_address").unlink(missing_ok=True)
    env = {**os.environ, "RADIUM_CONFIG": str(config)}
    cli = os.path.join(os.path.dirname(sys.executable), "radium")
    stop = {"now": False}

    def request_stop(signum: int, frame: object) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    children: dict[str, subprocess.Popen[bytes]] = {}
    client = PoolClient(listen, config_module.load(config).client.token, timeout=2)
    try:
        for service in ("pool", "acceptor", "agent"):
            with open(state / f"{service}.log", "ab") as log:
                children[service] = subprocess.Popen(
                    [cli, service] + ([] if service == "agent" else ["serve"]),
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        devices = _wait_ready(client, children, state, 60)
        how_to_stop = f"radium down --state-dir {state}" if detach else "Ctrl-C"
        out.write(
            f"Radium is up: pool at {listen}, acceptor 'local' with {devices} devices.\n"
            f"Use it{'' if detach else ' from another shell'}: export RADIUM_CONFIG={config}\n"
            f"Logs: {state}/pool.log, acceptor.log, agent.log. {how_to_stop} stops all three.\n"
        )
        out.flush()
        if detach:
            (state / PIDS).write_text(json.dumps({s: c.pid for s, c in children.items()}))
            children = {}  # they keep running: `radium down` stops them
            return 0
        while not stop["now"]:
            _check_alive(children, state)
            time.sleep(0.2)
        return 0
    finally:
        client.close()
        _stop(children)
