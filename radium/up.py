"""``radium up``: the embedded default — pool, CPU acceptor and node agent on this machine.

It keeps its own config (generated tokens, database, slots, agent socket) in a state directory,
supervises the three services as child processes, and stops them on Ctrl-C or SIGTERM; they
also die with it when it is killed outright (:mod:`radium.lifeline`). With ``--detach`` it
returns once they are ready, and ``radium down`` stops them. A lock on the state directory,
held by the services themselves, keeps a second ``radium up`` out, naming who holds it. Other
radium commands, and an engine's radium runtime, use them when pointed at that config
(``export RADIUM_CONFIG=...`` as it prints).
"""

from __future__ import annotations

import contextlib
import fcntl
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
from radium import lifeline
from radium.errors import AlreadyExistsError, RadiumError
from radium.poolclient import PoolClient

STOP_GRACE = 10.0
SERVICES = ("pool", "acceptor", "agent")
PIDS = "pids.json"
LOCK = "up.lock"


def default_state_dir() -> Path:
    if os.geteuid() == 0:
        return Path("/var/lib/radium/up")
    return (
        Path(os.environ.get("XDG_STATE_HOME", Path.home() / ".local" / "state")) / "radium" / "up"
    )


#: Where each service of the embedded pool serves Prometheus metrics (docs/metrics.md).
METRICS = {"pool": "127.0.0.1:7410", "acceptor": "127.0.0.1:7411", "agent": "127.0.0.1:7412"}


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
    host, _, port = listen.rpartition(":")
    leases = f"{host}:{int(port) + 1}" if port.isdigit() else ""  # the lease socket's
    text = (
        "# Written by `radium up`; its tokens are kept between runs.\n"
        f'[pool]\nlisten = "{listen}"\nlease_listen = "{leases}"\ndb = "{state / "pool.db"}"\n'
        f'agent_tokens = ["{agent}"]\nacceptor_tokens = ["{acceptor}"]\n'
        f'metrics = "{METRICS["pool"]}"\n'
        f'[client]\npool = "{listen}"\nleases = "{leases}"\ntoken = "{agent}"\n'
        f'[acceptor]\nname = "local"\npool = "{listen}"\ntoken = "{acceptor}"\nbackend = "auto"\n'
        f'cpu_devices = {cpu_devices}\nstate_dir = "{state / "acceptor"}"\n'
        # Port 0: the acceptor listens on a free port and registers the one it got.
        'data_address = "127.0.0.1:0"\n'
        f'metrics = "{METRICS["acceptor"]}"\n'
        f'[agent]\nenabled = true\nsocket = "{state / "agent.sock"}"\n'
        f'state_file = "{state / "agent-state.json"}"\nlog_file = "{state / "agent.log"}"\n'
        f'metrics = "{METRICS["agent"]}"\n'
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
        # Up: registered with this pool process (not a record it restored from its database).
        if status is not None and any(a.up for a in status.acceptors):
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


def _running(state: Path) -> dict[str, int]:
    """The processes of a ``radium up`` in ``state``: itself and its services, if still running
    (``pids.json`` is checked against each process's command line, not trusted)."""
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


def _claim(state: Path) -> TextIO:
    """The state directory's lock: a second ``radium up`` there fails, saying who holds it."""
    state.mkdir(parents=True, exist_ok=True, mode=0o700)
    state.chmod(0o700)  # tokens, the pool database, lease records
    lock = open(state / LOCK, "a")  # noqa: SIM115 - held, then inherited by the services
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        holders = _running(state)
        who = ", ".join(f"{name} (pid {pid})" for name, pid in holders.items())
        raise AlreadyExistsError(
            f"Radium is already up in {state}: held by {who or 'processes starting or stopping'}",
            hint=f"radium down --state-dir {state}",
        ) from None
    return lock


def _write_pids(state: Path, pids: dict[str, int]) -> None:
    (state / PIDS).write_text(json.dumps(pids))


def down(state: Path, out: TextIO = sys.stdout) -> int:
    """Stop what ``radium up`` started in ``state`` (the supervisor first, if it still runs)."""
    running = _running(state)
    if not running:
        raise RadiumError(f"Radium is not up in {state}", hint="radium up --detach starts it")
    processes = []
    for pid in sorted(running.values(), key=lambda p: p != running.get("up")):
        with contextlib.suppress(psutil.Error):
            process = psutil.Process(pid)
            process.terminate()
            processes.append(process)
    _, left = psutil.wait_procs(processes, timeout=STOP_GRACE)
    for process in left:
        with contextlib.suppress(psutil.Error):
            process.kill()
    (state / PIDS).unlink(missing_ok=True)
    out.write(f"Radium is down: stopped {', '.join(n for n in running if n != 'up')}.\n")
    return 0


def run(
    state: Path, listen: str, cpu_devices: int, out: TextIO = sys.stdout, detach: bool = False
) -> int:
    lock = _claim(state)
    try:
        return _supervise(state, lock, listen, cpu_devices, out, detach)
    finally:
        lock.close()  # the services keep it held for as long as any of them runs


def _supervise(
    state: Path, lock: TextIO, listen: str, cpu_devices: int, out: TextIO, detach: bool
) -> int:
    config = write_config(state, listen, cpu_devices)
    _write_pids(state, {"up": os.getpid()})
    env = {**os.environ, "RADIUM_CONFIG": str(config)}
    if not detach:  # they die with this process, however it ends
        env[lifeline.ENV_VAR] = str(os.getpid())
    cli = os.path.join(os.path.dirname(sys.executable), "radium")
    stop = {"now": False}

    def request_stop(signum: int, frame: object) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    children: dict[str, subprocess.Popen[bytes]] = {}
    client = None
    try:
        for service in SERVICES:
            with open(state / f"{service}.log", "ab") as log:
                children[service] = subprocess.Popen(
                    [cli, service] + ([] if service == "agent" else ["serve"]),
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    pass_fds=(lock.fileno(),),
                )
        pids = {s: c.pid for s, c in children.items()}
        _write_pids(state, pids if detach else {"up": os.getpid(), **pids})
        # After the fork: the client's gRPC threads must not be in the children.
        client = PoolClient(listen, config_module.load(config).client.token, timeout=2)
        devices = _wait_ready(client, children, state, 60)
        how_to_stop = f"radium down --state-dir {state}" if detach else "Ctrl-C"
        out.write(
            f"Radium is up: pool at {listen}, acceptor 'local' with {devices} devices.\n"
            f"Use it{'' if detach else ' from another shell'}: export RADIUM_CONFIG={config}\n"
            f"Logs: {state}/pool.log, acceptor.log, agent.log. {how_to_stop} stops all three.\n"
            "Metrics: "
            + ", ".join(f"http://{address}/metrics ({s})" for s, address in METRICS.items())
            + "\n"
        )
        out.flush()
        if detach:
            children = {}  # they keep running: `radium down` stops them
            return 0
        while not stop["now"]:
            _check_alive(children, state)
            time.sleep(0.2)
        return 0
    finally:
        if client is not None:
            client.close()
        _stop(children)
