"""The pool, the acceptor and the node agent of a gpu-check run, as ``radium up`` starts them.

Their config is ``radium up``'s (:func:`radium.upconfig.prepare`: fresh tokens, free loopback
ports, paths in the run's state folder) with the acceptor gpu-check wants written first:
NVIDIA through NVML (or the CPU backend in a dry run), process workers in the sandbox,
fractions under MPS (``unenforced`` in a dry run). Each service is a child of this process,
stopped by its pid (SIGTERM, then SIGKILL), with whatever it started that is still there.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil

from radium import config as config_module
from radium import lifeline, upconfig
from radium.errors import RadiumError
from radium.poolclient import PoolClient
from radium.statedir import open_state_dir

__all__ = ["SERVICES", "Services", "acceptor_table"]

SERVICES = ("pool", "acceptor", "agent")
STOP_GRACE = 15.0


def acceptor_table(state: Path, dry_run: bool) -> str:
    """The keys gpu-check sets before ``radium up``'s config fills in the rest."""
    return (
        "# gpu-check: the acceptor under test; the rest is radium up's.\n"
        "[acceptor]\n"
        'name = "gpu-check"\n'
        f'backend = "{"cpu" if dry_run else "nvml"}"\n'
        f'gpu_sharing = "{"unenforced" if dry_run else "mps"}"\n'
        f'mps_dir = "{state.parent / "mps"}"\n'
        "cpu_devices = 1\n"
        "heartbeat_interval = 0.5\n"
        "[acceptor.sandbox]\n"
        "enabled = true\n"
        f'uid_lock_dir = "{state / "uids"}"\n'
        "[agent]\n"
        "autostart = false\n"
        "[hook]\n"
        f'state_dir = "{state / "exec"}"\n'
    )


class Services:
    """The three services of one run, in ``state`` (a folder of this run, 0700)."""

    def __init__(self, state: Path, python: str, env: dict[str, str], dry_run: bool) -> None:
        self.state, self.python, self.dry_run = state, python, dry_run
        self.children: dict[str, subprocess.Popen[bytes]] = {}
        with open_state_dir(state, create=True) as directory:
            directory.write(upconfig.CONFIG, acceptor_table(state, dry_run).encode())
            self.config = upconfig.prepare(directory, None, None)
        self.settings = config_module.load(self.config)
        # The services die with this process, should it be killed outright (lifeline).
        self.env = {**env, "RADIUM_CONFIG": str(self.config), lifeline.ENV_VAR: str(os.getpid())}

    @property
    def client_env(self) -> dict[str, str]:
        """For ``radium exec``: the services' environment, less the supervisor's pid."""
        return {k: v for k, v in self.env.items() if k != lifeline.ENV_VAR}

    def start(self) -> None:
        for service in SERVICES:
            argv = [self.python, "-m", "radium.cli", service]
            argv += [] if service == "agent" else ["serve"]
            with open(self.state / f"{service}.log", "ab") as log:
                self.children[service] = subprocess.Popen(
                    argv, env=self.env, stdout=log, stderr=subprocess.STDOUT, cwd=self.state
                )

    def wait_ready(self, timeout: float) -> int:
        """Until the acceptor is registered and up; the pool's device count."""
        client = PoolClient(self.settings.client.pool, self.settings.client.token, timeout=2)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                self._check_alive()
                with contextlib.suppress(RadiumError):
                    status = client.status()
                    if any(a.up for a in status.acceptors) and os.path.exists(
                        self.settings.agent.socket
                    ):
                        return len(status.devices)
                time.sleep(0.2)
        finally:
            client.close()
        raise RuntimeError(f"pool and acceptor not up within {timeout:g}s: {self.log_tails()}")

    def devices(self) -> list[str]:
        """Each device the pool has: its model and memory."""
        client = PoolClient(self.settings.client.pool, self.settings.client.token, timeout=5)
        try:
            return [f"{d.device.model} {d.device.memory_mib} MiB" for d in client.status().devices]
        finally:
            client.close()

    def _check_alive(self) -> None:
        for service, child in self.children.items():
            if child.poll() is not None:
                raise RuntimeError(
                    f"radium {service} exited with {child.returncode}: {self.log_tails(service)}"
                )

    def log_tails(self, *services: str, lines: int = 6) -> str:
        tails = []
        for service in services or SERVICES:
            path = self.state / f"{service}.log"
            text = path.read_text(errors="replace") if path.exists() else ""
            tail = " / ".join(text.strip().splitlines()[-lines:])
            tails.append(f"{service}.log: {tail or '(empty)'}")
        return "; ".join(tails)

    def stop(self) -> list[int]:
        """Stop the services by pid, then what they started that outlived them: their pids."""
        descendants: list[psutil.Process] = []
        for child in self.children.values():
            with contextlib.suppress(psutil.Error):
                descendants += psutil.Process(child.pid).children(recursive=True)
        for child in reversed(list(self.children.values())):
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE
        for child in self.children.values():
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        return kill_left(descendants + stray_mps(self.state.parent))


def kill_left(processes: list[psutil.Process]) -> list[int]:
    """SIGKILL those of ``processes`` still running (the same processes: psutil checks their
    start time); their pids."""
    left = []
    for process in processes:
        with contextlib.suppress(psutil.Error):
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                process.kill()
                left.append(process.pid)
    return left


def stray_mps(state: Path) -> list[psutil.Process]:
    """MPS daemons (control or server) of this run's ``mps_dir``, should the acceptor have
    left one: found by their environment, never by name alone."""
    found = []
    for process in psutil.process_iter(["name"]):
        if "nvidia-cuda-mps" not in (process.info["name"] or ""):
            continue
        with contextlib.suppress(psutil.Error):
            pipe = process.environ().get("CUDA_MPS_PIPE_DIRECTORY", "")
            if pipe.startswith(str(state)):
                found.append(process)
    return found
