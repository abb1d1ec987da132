"""``radium up``: the embedded default — pool, CPU acceptor and node agent on this machine.

It keeps its own config (generated tokens, database, slots, agent socket, ports: see
:mod:`radium.upconfig`) in a state directory, supervises the three services as child
processes (:mod:`radium.upservices`), and stops them on Ctrl-C or SIGTERM; they also die with
it when it is killed outright (:mod:`radium.lifeline`). With ``--detach`` it returns once they
are ready, and ``radium down`` stops them. A lock on the state directory, held by the services
themselves, keeps a second ``radium up`` out, naming who holds it. Other radium commands, and
an engine's radium runtime, use them when pointed at that config (``export RADIUM_CONFIG=...``
as it prints); the command line finds the default state directory's config by itself
(radium.config.config_path).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TextIO

import psutil

from radium import config as config_module
from radium import lifeline, upconfig, upservices
from radium.configtree import Config
from radium.errors import AlreadyExistsError, RadiumError
from radium.poolclient import PoolClient
from radium.statedir import StateDir, default_up_dir, open_state_dir
from radium.upservices import STOP_GRACE

__all__ = ["LOCK", "PIDS", "default_state_dir", "down", "run", "running_configs"]

PIDS = "pids.json"
LOCK = "up.lock"


def default_state_dir() -> Path:
    """Where ``radium up`` keeps its state when ``--state-dir`` is not given."""
    return default_up_dir()


def _announce(out: TextIO, settings: Config, config: Path, devices: int, detach: bool) -> None:
    """What is up, the ``export`` to use it, where it logs, how it stops, its metrics."""
    state = config.parent
    how_to_stop = f"radium down --state-dir {state}" if detach else "Ctrl-C"
    metrics = {
        "pool": settings.pool.metrics,
        "acceptor": settings.acceptor.metrics,
        "agent": settings.agent.metrics,
    }
    out.write(
        f"Radium is up: pool at {settings.pool.listen}, acceptor '{settings.acceptor.name}' "
        f"with {devices} devices.\n"
        f"Use it{'' if detach else ' from another shell'}: export RADIUM_CONFIG={config}\n"
        f"Logs: {state}/pool.log, acceptor.log, agent.log. {how_to_stop} stops all three.\n"
    )
    served = [f"http://{address}/metrics ({name})" for name, address in metrics.items() if address]
    if served:
        out.write(f"Metrics: {', '.join(served)}\n")
    out.flush()


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


def running_configs() -> list[str]:
    """The configs of the ``radium up`` pools running on this machine (of those processes
    this user may see): what ``radium doctor`` tells a user to ``export``."""
    found = set()
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info["cmdline"] or []
        if cmdline[-2:] != ["pool", "serve"] or not any(p.endswith("radium") for p in cmdline):
            continue
        with contextlib.suppress(psutil.Error):
            config = process.environ().get(config_module.ENV_VAR, "")
            # A pool of radium up's: its state directory has the pids of its services.
            if config.endswith(f"/{upconfig.CONFIG}") and Path(config).with_name(PIDS).exists():
                found.add(config)
    return sorted(found)


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
    """Stop what ``radium up`` started in ``state`` (the supervisor first, if it still runs),
    and an agent of its config that something else started (:func:`_stop_other_agent`)."""
    try:
        directory = open_state_dir(state, create=False)
    except FileNotFoundError:
        raise _not_up(state) from None
    with directory:
        running = _running(directory)
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
        if running:
            directory.unlink(PIDS)
        other = _stop_other_agent(state)
    if not running and other is None:
        raise _not_up(state)
    stopped = [n for n in running if n != "up"]
    if other is not None and "agent" not in stopped:
        stopped.append("agent")
    out.write(f"Radium is down: stopped {', '.join(stopped)}.\n")
    return 0


def _stop_other_agent(state: Path, autostarted_only: bool = False) -> int | None:
    """Stop the agent of this instance's config that ``radium up`` did not start (``radium
    exec`` or the hook autostarted it): it would keep the agent's lock and metrics address,
    which the next ``radium up`` needs, and answer ``radium doctor``. Its pid, or None when
    there was none (or, with ``autostarted_only``, none that autostart started)."""
    from radium.agent import lockfile

    try:
        settings = config_module.load(state / "config.toml")
    except (RadiumError, OSError):
        return None
    lock = Path(settings.agent.state_file).with_suffix(".lock")
    return lockfile.stop_holder(lock, STOP_GRACE, lockfile.AUTOSTARTED if autostarted_only else "")


def run(
    state: Path,
    listen: str | None = None,
    cpu_devices: int | None = None,
    out: TextIO = sys.stdout,
    detach: bool = False,
) -> int:
    """Run the embedded pool from ``state`` (created 0700, refused if another user could read
    or replace it): until stopped, or, with ``detach``, until it is up. ``listen`` and
    ``cpu_devices``, when given, are set in its config; the rest of it is kept (upconfig)."""
    with open_state_dir(state, create=True) as directory:
        lock = _claim(directory)
        try:
            return _supervise(directory, lock, listen, cpu_devices, out, detach)
        finally:
            os.close(lock)  # the services keep it held for as long as any of them runs


def _supervise(
    directory: StateDir,
    lock: int,
    listen: str | None,
    cpu_devices: int | None,
    out: TextIO,
    detach: bool,
) -> int:
    state = directory.path
    # One that radium exec autostarted while this was down: its leases (the state file) are
    # resumed by ours, which needs its lock and metrics address.
    _stop_other_agent(state, autostarted_only=True)
    config = upconfig.prepare(directory, listen, cpu_devices)
    settings = config_module.load(config)
    _write_pids(directory, {"up": os.getpid()})
    env = {**os.environ, "RADIUM_CONFIG": str(config)}
    if not detach:  # they die with this process, however it ends
        env[lifeline.ENV_VAR] = str(os.getpid())
    stop = {"now": False}

    def request_stop(signum: int, frame: object) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    children: dict[str, subprocess.Popen[bytes]] = {}
    client = None
    try:
        children = upservices.start(directory, env, lock)
        pids = {s: c.pid for s, c in children.items()}
        _write_pids(directory, pids if detach else {"up": os.getpid(), **pids})
        # After the fork: the client's gRPC threads must not be in the children.
        client = PoolClient(settings.client.pool, settings.client.token, timeout=2)
        devices = upservices.wait_ready(client, children, state, 60)
        _announce(out, settings, config, devices, detach)
        if detach:
            children = {}  # they keep running: `radium down` stops them
            return 0
        while not stop["now"]:
            upservices.check_alive(children, state)
            time.sleep(0.2)
        return 0
    finally:
        if client is not None:
            client.close()
        upservices.stop(children)
