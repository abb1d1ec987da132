"""A lease's worker, in one of two modes, and the control socket connections reach it through.

- Process mode: ``python -m radium_interposer.worker`` with the acceptor's own Python, in the
  lease's sandbox (:mod:`radium.acceptor.sandbox`), its control socket inherited (a socketpair).
- Container mode: the same worker inside the lease's image, started by the acceptor's docker
  with the ``radium`` runtime, so the hook mounts the Radium bundle into it exactly as into any
  container (distribution and Python detected the same way): code, Python and libraries match
  the client's. It runs as the lease's uid with the sandbox's guarantees from the engine and
  connects back to a control socket bound in from its slot; no network.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from radium.acceptor.engines import Docker
from radium.acceptor.sandbox import HOME_TARGET, Sandbox, Tenant
from radium.acceptor.worker_output import TAIL_LINES, OutputTail, report_container
from radium.errors import RadiumError, UnavailableError
from radium_interposer import control as control_messages
from radium_interposer import wire
from radium_interposer.control import CONNECTION, READY, Counters, CountersReader

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
    ) -> None:
        """Start the worker confined by ``sandbox`` (``join(pid)`` applies the lease's cgroups
        before it runs), or unconfined as this process's user when there is none; ``oom()``
        counts the OOM killer's kills in its cgroup (the report of its end names its cap)."""
        self.control, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.reader = CountersReader()
        argv = [sys.executable, *WORKER, "--lease", tenant.lease_id]
        argv += ["--control-fd", str(child.fileno())]
        # Its output is the tenant's: read into a bounded tail, never the acceptor's stderr.
        self.output = OutputTail(tenant.lease_id, oom=oom)
        with child:
            try:
                if sandbox is not None:
                    spawn = sandbox.spawn(tenant, argv, child.fileno(), join, self.output.write_fd)
                    self.process = spawn
                else:
                    self.process = subprocess.Popen(
                        argv,
                        pass_fds=[child.fileno()],
                        cwd=tenant.home,
                        env={**os.environ, **tenant.env},
                        stdin=subprocess.DEVNULL,
                        stdout=self.output.write_fd,
                        stderr=self.output.write_fd,
                    )
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
        _notify(self.control, text)

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


class ContainerWorker:
    """The worker inside the lease's image; started in the background, connects back."""

    mode = "container"

    def __init__(
        self,
        tenant: Tenant,
        slot: Path,
        engine: Docker,
        image: str,
        sandbox: Sandbox | None,
        runtime: str = "radium",
    ) -> None:
        """Start the worker in ``image``, confined as ``sandbox`` says (as root without one)."""
        self.tenant, self.slot, self.engine, self.image = tenant, slot, engine, image
        self.lease_id = tenant.lease_id
        self.container = ""
        self.control: socket.socket | None = None
        self.reader = CountersReader()
        self.error = ""
        self.ready = threading.Event()
        # Only the socket's directory and the lease's home are bound in, never the slot (the
        # lease record and its credential stay outside).
        control = slot / "control"
        control.mkdir(mode=0o755, exist_ok=True)
        path = control / "control.sock"
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        os.chown(path, tenant.uid, tenant.uid)
        self.listener.listen(1)
        self.user, self.confinement = sandbox.docker_options(tenant) if sandbox else ("", {})
        # RADIUM_GPUS makes it a Radium request: the hook mounts the bundle into it.
        self.env = {**tenant.env, "RADIUM_GPUS": "0", "HOME": HOME_TARGET}
        self.runtime = runtime
        threading.Thread(target=self._start, daemon=True).start()

    def _start(self) -> None:
        name = f"radium-worker-{self.lease_id}"
        control = f"{CONTROL_TARGET}/control.sock"
        command = ["python3", *WORKER, "--lease", self.lease_id, "--control-socket", control]
        share = self.tenant.share
        try:
            self.container = self.engine.run_container(
                name,
                self.image,
                command,
                env=self.env,
                binds=[
                    f"{self.slot / 'control'}:{CONTROL_TARGET}:ro",
                    f"{self.tenant.home}:{HOME_TARGET}",
                ],
                workdir=HOME_TARGET,
                runtime=self.runtime,
                memory_bytes=share.memory_mib << 20,
                nano_cpus=int(share.cpus * 1e9),
                user=self.user,
                confinement=self.confinement,
            )
            self.control = self._wait_for_connection()
            self.control.settimeout(START_TIMEOUT)  # a worker that connects and says nothing
            try:
                said = self.control.recv(len(READY))
            finally:
                self.control.settimeout(None)
            if said != READY:
                raise UnavailableError("the worker closed its control socket before it was ready")
            pid = self.engine.container_state(self.container).get("Pid", 0)
            (self.slot / "worker.pid").write_text(str(pid))
            log.info("lease %s: worker runs in container %s of %s", self.lease_id, name, self.image)
        except (OSError, RadiumError) as exc:
            self.error = str(exc)
            log.error(
                "lease %s: container worker of %s failed: %s",
                self.lease_id,
                self.image,
                exc,
                exc_info=True,
            )
        finally:
            self.listener.close()
            self.ready.set()

    def _wait_for_connection(self) -> socket.socket:
        """The worker's control connection; a worker that exits first is an error with its log."""
        self.listener.settimeout(1.0)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            try:
                connection, _ = self.listener.accept()
                return connection
            except socket.timeout:
                state = self.engine.container_state(self.container)
                if not state.get("Running"):
                    output = self.engine.container_logs(self.container).splitlines()
                    raise UnavailableError(
                        f"the worker container exited ({state.get('ExitCode')}): "
                        f"{output[-1] if output else state.get('Error') or 'no output'}"
                    ) from None
        raise UnavailableError(f"the worker did not connect within {START_TIMEOUT:g}s")

    @property
    def pid(self) -> int:
        try:
            return int((self.slot / "worker.pid").read_text())
        except (OSError, ValueError):
            return 0

    def alive(self) -> bool:
        if not self.ready.is_set():
            return True  # still starting
        if self.control is None:
            return False
        readable, _, _ = select.select([self.control], [], [], 0)
        return not readable or self.control.recv(1, socket.MSG_PEEK) != b""

    def hand_over(self, connection: socket.socket, timeout: float = SEND_TIMEOUT) -> None:
        """Pass the connection to the worker once it is up; ``socket.timeout`` if it does not
        read in time, UnavailableError if it did not start."""
        self.ready.wait(START_TIMEOUT)
        if self.control is None or not self.ready.is_set():
            why = self.error or f"not up within {START_TIMEOUT:g}s"
            raise UnavailableError(
                f"the worker of lease {self.lease_id} in {self.image} did not start: {why}"
            )
        wire.send_fd(self.control, CONNECTION, connection.fileno(), timeout)

    def notify(self, text: str) -> None:
        """Tell the worker the lease is preempted (dropped, logged, if it does not read)."""
        self.ready.wait(START_TIMEOUT)
        if self.control is not None:  # one that never started has no one to tell
            _notify(self.control, text)

    def counters(self) -> Counters | None:
        return self.reader.poll(self.control) if self.control is not None else None

    def stop(self) -> None:
        if self.control is not None and self.container:
            self._report_end()  # before the control socket closes: then it exits anyway
        if self.control is not None:
            self.control.close()
        self.listener.close()
        self.ready.wait(START_TIMEOUT)
        if self.container:
            self.engine.remove_container(self.container)

    def _report_end(self) -> None:
        """A worker container that ended before the acceptor stopped it: logged as it ended."""
        try:
            state = self.engine.container_state(self.container)
            if state.get("Running", True):
                return
            lines = self.engine.container_logs(self.container, TAIL_LINES).splitlines()
        except (OSError, RadiumError) as exc:
            log.debug("lease %s: no state of its worker container: %s", self.lease_id, exc)
            return
        where = f"in container {self.container[:12]} of {self.image}"
        report_container(self.lease_id, where, state, lines)


def _notify(control: socket.socket, text: str) -> None:
    """Send a notice within SEND_TIMEOUT: a worker that stopped reading keeps its stale view
    (the slot keeps the text for its replacement), not the acceptor's thread."""
    try:
        wire.send_within(control, control_messages.notice(text), SEND_TIMEOUT)
    except OSError as exc:  # socket.timeout too
        log.warning("control socket: the worker did not take the notice: %s", exc)
