"""One GPU's NVIDIA MPS control daemon, as the root acceptor runs it (docs/gpus.md).

``nvidia-cuda-mps-control -d`` is started with ``CUDA_VISIBLE_DEVICES`` set to the GPU's UUID and
a pipe and a log directory of its own, ``<mps_dir>/<uuid>/{pipe,log}``: root's (0700) while no
lease shares the GPU, the GPU's shared worker uid's (0700) while leases do, so that its MPS
server, which runs as that uid, reaches them and no other worker does (a lease's sandbox binds
in its own GPU's pipe directory only). The daemon forks away from its starter; it is known by
the pid it writes into the pipe directory (with its start time, against pid reuse), asked
through the control binary (``get_server_list``: its servers, and its health), and stopped by
``quit``, then killed with its servers if it outlives :data:`QUIT_TIMEOUT`. Every call to the
binary has a deadline.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psutil

from radium.errors import DeadlineError, UnavailableError

__all__ = ["CONTROL", "NVIDIA_BIN", "Daemon", "find_control"]

log = logging.getLogger(__name__)
CONTROL = "nvidia-cuda-mps-control"
#: Where NVIDIA's container images and GPU hosts keep the driver's binaries off PATH.
NVIDIA_BIN = "/usr/local/nvidia/bin"
PID_FILE = "nvidia-cuda-mps-control.pid"
#: ``-d`` returns once it forked; its pid file and control socket follow within this.
START_TIMEOUT = 15.0
#: One command through the control binary (it answers at once when the daemon is up).
COMMAND_TIMEOUT = 5.0
#: How long ``quit`` (or ``shutdown_server``) may take before what is left is killed.
QUIT_TIMEOUT = 10.0
_POLL = 0.05
#: The longest path a unix socket can be bound at (``sun_path`` less its NUL).
SOCKET_PATH_MAX = 107
_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def find_control(configured: str, path: str | None = None) -> str | None:
    """The control binary: ``configured`` when set (None if it is not an executable file),
    else ``nvidia-cuda-mps-control`` on ``path`` (PATH by default), then in :data:`NVIDIA_BIN`."""
    if configured:
        return configured if os.access(configured, os.X_OK) and Path(configured).is_file() else None
    search = os.pathsep.join(p for p in (path or os.environ.get("PATH", _PATH), NVIDIA_BIN) if p)
    return shutil.which(CONTROL, path=search)


class Daemon:
    """The MPS control daemon of the GPU ``uuid``, under ``root`` (``<mps_dir>/<uuid>``)."""

    def __init__(self, uuid: str, control: str, root: Path) -> None:
        self.uuid, self.control, self.root = uuid, control, root
        self.pipe, self.log = root / "pipe", root / "log"
        self.pid: int | None = None
        self._born = 0.0  # the daemon's start time: a reused pid is not it
        #: The uid its directories belong to (0: root's, no lease shares the GPU).
        self.owner = 0

    def env(self) -> dict[str, str]:
        """The environment the daemon and the control binary run with."""
        return {
            "PATH": os.pathsep.join((os.path.dirname(self.control), _PATH)),
            "CUDA_VISIBLE_DEVICES": self.uuid,
            "CUDA_MPS_PIPE_DIRECTORY": str(self.pipe),
            "CUDA_MPS_LOG_DIRECTORY": str(self.log),
        }

    def start(self) -> None:
        """Start the daemon (a stale one of an earlier run of ours is stopped first);
        UnavailableError with its own words when it does not come up."""
        longest = len(os.fsencode(self.pipe / "control_privileged"))
        if longest > SOCKET_PATH_MAX:
            raise UnavailableError(
                f"the MPS pipe directory {self.pipe} is too long for its sockets' names "
                f"({longest} bytes, at most {SOCKET_PATH_MAX})",
                hint="set acceptor.mps_dir to a shorter path",
            )
        self._directories()
        # The server and its clients run as the GPU's worker uid, which must pass through
        # every directory above the pipe (one 0700 parent gave clients "error 805").
        closed = next((p for p in self.root.parents if not p.stat().st_mode & 0o001), None)
        if closed is not None:
            raise UnavailableError(
                f"the MPS pipe directory {self.pipe} is out of the lease workers' reach: "
                f"{closed} is not searchable by other users",
                hint="set acceptor.mps_dir under directories others may pass through (o+x)",
            )
        self._stale()
        # Its output into a file, not a pipe: a daemon that kept the pipe open would make
        # reading it to its end wait for the daemon's.
        with tempfile.TemporaryFile() as output:
            try:
                done = subprocess.run(
                    [self.control, "-d"],
                    env=self.env(),
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=output,
                    timeout=START_TIMEOUT,
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise UnavailableError(f"{self.control} -d did not start: {exc}") from exc
            output.seek(0)
            said = output.read(2000).decode(errors="replace").strip()
        if done.returncode != 0:
            raise UnavailableError(
                f"{self.control} -d exited with {done.returncode}: {said or 'no message'}"
            )
        deadline = time.monotonic() + START_TIMEOUT
        while (pid := self._pid_file()) is None or not (self.pipe / "control").exists():
            if time.monotonic() > deadline:
                raise UnavailableError(f"{self.control} -d wrote no pid file in {self.pipe}")
            time.sleep(_POLL)
        try:
            self._born = psutil.Process(pid).create_time()
        except psutil.Error as exc:
            raise UnavailableError(f"the MPS control daemon {pid} exited at once") from exc
        self.pid = pid
        self.servers()  # it answers: it is up
        log.info("MPS control daemon %d for GPU %s (pipe %s)", pid, self.uuid, self.pipe)

    def _directories(self) -> None:
        """``root`` 0711 (the server's uid passes through), pipe and log 0700 of their owner."""
        for directory in (self.root.parent, self.root):
            directory.mkdir(mode=0o711, parents=True, exist_ok=True)
            if os.geteuid() == 0:
                os.chown(directory, 0, 0)
            directory.chmod(0o711)
        for directory in (self.pipe, self.log):
            directory.mkdir(mode=0o700, exist_ok=True)
        self.own(self.owner)

    def own(self, uid: int) -> None:
        """Give the pipe and log directories (and what is in them) to ``uid``: the GPU's
        shared worker uid, whose MPS server works in them; 0 gives them back to root."""
        for directory in (self.pipe, self.log):
            for path in [directory, *directory.iterdir()]:
                if os.geteuid() == 0:  # tests run unprivileged: only root chowns
                    os.lchown(path, uid, uid)
            directory.chmod(0o700)
        self.owner = uid

    def _pid_file(self) -> int | None:
        try:
            return int((self.pipe / PID_FILE).read_text().strip())
        except (OSError, ValueError):
            return None

    def _stale(self) -> None:
        """A daemon an earlier run of this acceptor left in the pipe directory: stopped."""
        pid = self._pid_file()
        with contextlib.suppress(psutil.Error):
            if pid is not None and psutil.Process(pid).name().startswith(CONTROL[:15]):
                self.pid, self._born = pid, psutil.Process(pid).create_time()
                log.warning("stopping the MPS control daemon %d an earlier run left", pid)
                self.stop()
        (self.pipe / PID_FILE).unlink(missing_ok=True)

    def ask(self, command: str, timeout: float = COMMAND_TIMEOUT) -> str:
        """The daemon's answer to ``command`` (a line of its control language)."""
        try:
            done = subprocess.run(
                [self.control],
                input=(command + "\n").encode(),
                env=self.env(),
                capture_output=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as exc:
            raise DeadlineError(f"the MPS control daemon of GPU {self.uuid} did not answer "
                                f"{command!r} within {timeout:g}s") from exc  # fmt: skip
        except OSError as exc:
            raise UnavailableError(f"cannot run {self.control}: {exc}") from exc
        if done.returncode != 0:
            said = (done.stderr or done.stdout).decode(errors="replace").strip()
            raise UnavailableError(
                f"the MPS control daemon of GPU {self.uuid} refused {command!r}: {said}"
            )
        return done.stdout.decode(errors="replace")

    def servers(self) -> list[int]:
        """The pids of the daemon's MPS servers (``get_server_list``); raises when it does
        not answer: the health check."""
        return [int(word) for word in self.ask("get_server_list").split() if word.isdigit()]

    def alive(self) -> bool:
        """Whether the daemon process runs (its pid, born when ours was, not a zombie)."""
        if self.pid is None:
            return False
        with contextlib.suppress(psutil.Error):
            return _runs(psutil.Process(self.pid), self._born)
        return False

    def shutdown_servers(self) -> None:
        """End every MPS server (the GPU's last shared lease ended: its uid is to go back to
        the host with nothing running as it); killed if they outlive :data:`QUIT_TIMEOUT`."""
        with contextlib.suppress(DeadlineError, UnavailableError):
            pids = self.servers()
            for pid in pids:
                self.ask(f"shutdown_server {pid}")
            _wait_gone(pids, time.monotonic() + QUIT_TIMEOUT)

    def stop(self) -> None:
        """``quit``, then kill the daemon and its servers if they outlive the deadline."""
        if self.pid is None:
            return
        pids: list[int] = []
        with contextlib.suppress(DeadlineError, UnavailableError):
            pids = self.servers()
            self.ask("quit")
        deadline = time.monotonic() + QUIT_TIMEOUT
        daemon = [self.pid] if self.alive() else []
        _wait_gone([*daemon, *pids], deadline)
        self.pid = None
        (self.pipe / PID_FILE).unlink(missing_ok=True)


def _wait_gone(pids: list[int], deadline: float) -> None:
    """Wait until no process of ``pids`` runs, until ``deadline``; kill what is left. A zombie
    counts as gone: a daemon forked away is its init's to reap, not ours."""
    processes = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            processes.append((psutil.Process(pid), psutil.Process(pid).create_time()))
    while (left := [p for p, born in processes if _runs(p, born)]) and time.monotonic() < deadline:
        time.sleep(_POLL)
    for process in left:
        log.warning("MPS process %d outlived its deadline; killed", process.pid)
        with contextlib.suppress(psutil.Error):
            process.kill()


def _runs(process: psutil.Process, born: float) -> bool:
    try:
        return process.create_time() == born and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
