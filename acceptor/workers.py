"""A lease's worker, in one of two modes, and the control socket connections reach it through.

- Process mode: ``python -m radium_interposer.worker`` with the acceptor's own Python, in the
  lease's sandbox (:mod:`radium.acceptor.sandbox`), its control socket inherited (a socketpair).
- Container mode (:mod:`radium.acceptor.container_worker`): the same worker inside the lease's
  image, started by the acceptor's docker with the ``radium`` runtime, so the hook mounts the
  Radium bundle into it exactly as into any container (distribution and Python detected the
  same way): code, Python and libraries match the client's. It runs as the lease's uid with the
  sandbox's guarantees from the engine and connects back to a control socket bound in from its
  slot; no network.

A process-mode worker's output goes to :mod:`radium.acceptor.worker_output`, a container's to
docker (at most 1 MB kept); either's end is logged with its last lines.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Callable

from radium.acceptor.sandbox import Sandbox, Tenant
from radium.acceptor.worker_output import Budget, OutputTail
from radium.errors import UnavailableError
from radium_interposer import control as control_messages
from radium_interposer import wire
from radium_interposer.control import CONNECTION, READY, Counters, CountersReader

__all__ = [
    "CONTROL_TARGET",
    "SEND_TIMEOUT",
    "START_TIMEOUT",
    "WORKER",
    "ProcessWorker",
    "notify_within",
]

log = logging.getLogger(__name__)
WORKER = ["-m", "radium_interposer.worker"]
#: Where the control socket's directory is mounted inside a container-mode worker.
CONTROL_TARGET = "/run/radium-worker"
START_TIMEOUT = 120.0
#: How long a message to a worker may wait for it to read its control socket: a worker runs
#: the tenant's code and may have stopped reading (``kill -STOP`` of itself); the acceptor's
#: thread must not wait on it for ever.
SEND_TIMEOUT = 5.0


class ProcessWorker:
    """A running worker process and the control socket connections are handed over on."""

    mode = "process"

    def __init__(
        self,
        tenant: Tenant,
        slot: Path,
        sandbox: Sandbox | None,
        join: Callable[[int], object],
        oom: Callable[[], int] | None = None,
        budget: Budget | None = None,
    ) -> None:
        """Start the worker confined by ``sandbox`` (``join(pid)`` applies the lease's cgroups
        before it runs), or unconfined as this process's user when there is none; ``oom()``
        counts the OOM killer's kills in its cgroup (the report of its end names its cap);
        ``budget``: the lease's lines in the log, shared by its successive workers."""
        self.control, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.reader = CountersReader()
        argv = [sys.executable, *WORKER, "--lease", tenant.lease_id]
        argv += ["--control-fd", str(child.fileno())]
        # Its output is the tenant's: read into a bounded tail, never the acceptor's stderr.
        self.output = OutputTail(tenant.lease_id, budget, oom)
        with child:
            try:
                self.process = _spawn(tenant, argv, child.fileno(), sandbox, join, self.output)
            except BaseException:
                self.output.started(None, sandboxed=False)
                raise
        self.output.started(self.process, sandboxed=sandbox is not None)
        (slot / "worker.pid").write_text(str(self.process.pid))
        self._wait_ready(tenant.lease_id)

    def _wait_ready(self, lease_id: str) -> None:
        """Until the worker says it is up; one that dies first (its sandbox could not be built,
        its Python failed) is an error with its exit status."""
        self.control.settimeout(START_TIMEOUT)
        try:
            said = self.control.recv(len(READY))
        except OSError:
            said = b""
        self.control.settimeout(None)
        if said == READY:
            return
        try:
            why = f"exited ({self.process.wait(timeout=10)})"
        except subprocess.TimeoutExpired:
            why = f"was not up within {START_TIMEOUT:g}s"
        self.stop()
        raise UnavailableError(
            f"the worker of lease {lease_id} {why} before it was ready",
            hint="its own message is in the acceptor log",
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def hand_over(self, connection: socket.socket, timeout: float = SEND_TIMEOUT) -> None:
        """Pass the connection to the worker; ``socket.timeout`` if it does not read in time."""
        wire.send_fd(self.control, CONNECTION, connection.fileno(), timeout)

    def notify(self, text: str) -> None:
        """Tell the worker the lease is preempted (dropped, logged, if it does not read)."""
        notify_within(self.control, text)

    def counters(self) -> Counters | None:
        return self.reader.poll(self.control)

    def stop(self) -> None:
        self.output.stop()  # its end is the acceptor's doing: not reported as a crash
        self.control.close()  # the worker exits when its control socket closes
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        try:
            self.process.wait(timeout=START_TIMEOUT)
        except subprocess.TimeoutExpired:  # unkillable (stuck in the kernel): not our thread too
            log.error("worker %d did not exit after SIGKILL; left behind", self.process.pid)


def _spawn(
    tenant: Tenant,
    argv: list[str],
    control: int,
    sandbox: Sandbox | None,
    join: Callable[[int], object],
    output: OutputTail,
) -> subprocess.Popen[bytes]:
    """The worker's process, its stdout and stderr into ``output``: confined by ``sandbox``,
    or unconfined as this process's user (tests only)."""
    if sandbox is not None:
        return sandbox.spawn(tenant, argv, control, join, output.write_fd)
    return subprocess.Popen(
        argv,
        pass_fds=[control],
        cwd=tenant.home,
        env={**os.environ, **tenant.env},
        stdin=subprocess.DEVNULL,
        stdout=output.write_fd,
        stderr=output.write_fd,
    )


def notify_within(control: socket.socket, text: str) -> None:
    """Send a notice within SEND_TIMEOUT: a worker that stopped reading keeps its stale view
    (the slot keeps the text for its replacement), not the acceptor's thread."""
    try:
        wire.send_within(control, control_messages.notice(text), SEND_TIMEOUT)
    except OSError as exc:  # socket.timeout too
        log.warning("control socket: the worker did not take the notice: %s", exc)
