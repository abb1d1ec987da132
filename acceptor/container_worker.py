"""A lease's container-mode worker: the worker inside the lease's image (the module docstring of
:mod:`radium.acceptor.workers` says how it is confined and reached), and the report of its end
from docker's state."""

from __future__ import annotations

import contextlib
import logging
import os
import select
import socket
import threading
import time
from pathlib import Path
from typing import Any, Mapping, Protocol, runtime_checkable

from radium.acceptor.engines import Engine
from radium.acceptor.sandbox import HOME_TARGET, Sandbox, Tenant
from radium.acceptor.worker_output import TAIL_LINES, Budget, report_container
from radium.acceptor.workers import (
    CONTROL_TARGET,
    SEND_TIMEOUT,
    START_TIMEOUT,
    WORKER,
    notify_within,
)
from radium.errors import RadiumError, UnavailableError
from radium_interposer import wire
from radium_interposer.control import CONNECTION, READY, Counters, CountersReader

__all__ = ["ContainerRuntime", "ContainerWorker"]

log = logging.getLogger(__name__)


@runtime_checkable
class ContainerRuntime(Engine, Protocol):
    """An engine that also runs containers (docker): what a container-mode worker needs of it.
    The launcher picks it once (a containerd engine is none: it only pulls), and tests give it
    a fake instead of a daemon."""

    def run_container(
        self,
        name: str,
        image: str,
        command: list[str],
        *,
        env: dict[str, str],
        binds: list[str],
        workdir: str,
        runtime: str,
        memory_bytes: int = 0,
        nano_cpus: int = 0,
        user: str = "",
        confinement: Mapping[str, Any] | None = None,
    ) -> str:
        """Create and start a detached container with no network; its id."""
        ...

    def container_state(self, container: str) -> dict[str, Any]:
        """docker's ``State`` of the container (``Pid``, ``Running``, ``ExitCode``, ...)."""
        ...

    def container_logs(self, container: str, lines: int = 20) -> str:
        """The container's last output lines."""
        ...

    def remove_container(self, container: str) -> None:
        """Remove the container, killing it; nothing if it is gone."""
        ...


class ContainerWorker:
    """The worker inside the lease's image; started in the background, connects back."""

    mode = "container"

    def __init__(
        self,
        tenant: Tenant,
        slot: Path,
        engine: ContainerRuntime,
        image: str,
        sandbox: Sandbox | None,
        runtime: str = "radium",
        budget: Budget | None = None,
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
        self.runtime, self.budget = runtime, budget
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
                    *(f"{source}:{path}" for source, path in self.tenant.binds),  # MPS's
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
            notify_within(self.control, text)

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
        report_container(self.lease_id, where, state, lines, self.budget)
