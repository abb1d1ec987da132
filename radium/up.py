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
from radium import lifeline, tomlcache
from radium.errors import AlreadyExistsError, RadiumError
from radium.poolclient import PoolClient
from radium.statedir import StateDir, open_state_dir

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


def _previous(directory: StateDir) -> config_module.PoolConfig | None:
    """The pool config an earlier ``radium up`` wrote here, if any (its tokens are kept)."""
    if (raw := directory.read("config.toml")) is None:
        return None
    source = f"config file {directory.path / 'config.toml'}"
    return config_module.from_dict(tomlcache.parse(raw, source)).pool


def write_config(directory: StateDir, listen: str, cpu_devices: int) -> Path:
    """The config of this embedded pool; tokens are generated once and kept (0600)."""
    state = directory.path
    path = state / "config.toml"
    previous = _previous(directory)
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
    directory.write("config.toml", text.encode())
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


def _running(directory: StateDir) -> dict[str, int]:
    """The processes of a ``radium up`` in ``directory``: itself and its services, if still
    running (``pids.json`` is checked against each process's command line, not trusted)."""
    try:
        pids = json.loads(directory.read(PIDS) or b"{}")
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


def _claim(directory: StateDir) -> int:
    """The state directory's lock: a second ``radium up`` there fails, saying who holds it."""
    # Held, then inherited by the services (pass_fds).
    lock = directory.open(LOCK, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(lock)
        holders = _running(directory)
        who = ", ".join(f"{name} (pid {pid})" for name, pid in holders.items())
        state = directory.path
        raise AlreadyExistsError(
            f"Radium is already up in {state}: held by {who or 'processes starting or stopping'}",
            hint=f"radium down --state-dir {state}",
        ) from None
    return lock


def _write_pids(directory: StateDir, pids: dict[str, int]) -> None:
    directory.write(PIDS, json.dumps(pids).encode())


def _not_up(state: Path) -> RadiumError:
    return RadiumError(f"Radium is not up in {state}", hint="radium up --detach starts it")


def down(state: Path, out: TextIO = sys.stdout) -> int:
    """Stop what ``radium up`` started in ``state`` (the supervisor first, if it still runs)."""
    try:
        directory = open_state_dir(state, create=False)
    except FileNotFoundError:
        raise _not_up(state) from None
    with directory:
        running = _running(directory)
        if not running:
            raise _not_up(state)
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
        directory.unlink(PIDS)
    out.write(f"Radium is down: stopped {', '.join(n for n in running if n != 'up')}.\n")
    return 0


def run(
    state: Path, listen: str, cpu_devices: int, out: TextIO = sys.stdout, detach: bool = False
) -> int:
    """Run the embedded pool from ``state`` (created 0700, refused if another user could read
    or replace it): until stopped, or, with ``detach``, until it is up."""
    with open_state_dir(state, create=True) as directory:
        lock = _claim(directory)
        try:
            return _supervise(directory, lock, listen, cpu_devices, out, detach)
        finally:
            os.close(lock)  # the services keep it held for as long as any of them runs


def _supervise(
    directory: StateDir, lock: int, listen: str, cpu_devices: int, out: TextIO, detach: bool
) -> int:
    state = directory.path
    config = write_config(directory, listen, cpu_devices)
    _write_pids(directory, {"up": os.getpid()})
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
            log = directory.open(f"{service}.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            with os.fdopen(log, "ab") as log_file:
                children[service] = subprocess.Popen(
                    [cli, service] + ([] if service == "agent" else ["serve"]),
                    env=env,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    pass_fds=(lock,),
                )
        pids = {s: c.pid for s, c in children.items()}
        _write_pids(directory, pids if detach else {"up": os.getpid(), **pids})
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
