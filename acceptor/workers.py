"""A lease's worker, in one of two modes, and the control socket connections reach it through.

- Process mode: ``python -m radium_interposer.worker`` with the acceptor's own Python, its
  control socket inherited (a socketpair).
- Container mode: the same worker inside the lease's image, started by the acceptor's docker
  with the ``radium`` runtime, so the hook mounts the Radium bundle into it exactly as into any
  container (distribution and Python detected the same way): code, Python and libraries match
  the client's. It connects back to a control socket in its slot (a bind mount); no network.
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from radium.acceptor.engines import Docker
from radium.acceptor.limits import Share
from radium.errors import RadiumError, UnavailableError
from radium_interposer import wire

log = logging.getLogger(__name__)
WORKER = ["-m", "radium_interposer.worker"]
#: Where the slot is mounted inside a container-mode worker.
SLOT_TARGET = "/run/radium-worker"
START_TIMEOUT = 120.0


class ProcessWorker:
    """A running worker process and the control socket connections are handed over on."""

    mode = "process"

    def __init__(self, lease_id: str, slot: Path, env: dict[str, str]) -> None:
        self.control, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        with child:
            self.process = subprocess.Popen(
                [sys.executable, *WORKER, "--lease", lease_id, "--control-fd", str(child.fileno())],
                pass_fds=[child.fileno()],
                cwd=slot,
                env=env,
                stdin=subprocess.DEVNULL,
            )
        (slot / "worker.pid").write_text(str(self.process.pid))

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def hand_over(self, connection: socket.socket) -> None:
        wire.send_fd(self.control, b"c", connection.fileno())

    def stop(self) -> None:
        self.control.close()  # the worker exits when its control socket closes
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self.process.wait()


class ContainerWorker:
    """The worker inside the lease's image; started in the background, connects back."""

    mode = "container"

    def __init__(
        self,
        lease_id: str,
        slot: Path,
        env: dict[str, str],
        engine: Docker,
        image: str,
        share: Share,
        runtime: str = "radium",
    ) -> None:
        self.lease_id, self.slot, self.engine, self.image = lease_id, slot, engine, image
        self.container = ""
        self.control: socket.socket | None = None
        self.error = ""
        self.ready = threading.Event()
        path = slot / "control.sock"
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen(1)
        self.env = {**env, "RADIUM_GPUS": "0"}  # a Radium request: the hook mounts the bundle
        self.runtime, self.share = runtime, share
        threading.Thread(target=self._start, daemon=True).start()

    def _start(self) -> None:
        name = f"radium-worker-{self.lease_id}"
        control = f"{SLOT_TARGET}/control.sock"
        command = ["python3", *WORKER, "--lease", self.lease_id, "--control-socket", control]
        try:
            self.container = self.engine.run_container(
                name,
                self.image,
                command,
                env=self.env,
                binds=[f"{self.slot}:{SLOT_TARGET}"],
                workdir=SLOT_TARGET,
                runtime=self.runtime,
                memory_bytes=self.share.memory_mib << 20,
                nano_cpus=int(self.share.cpus * 1e9),
            )
            self.control = self._wait_for_connection()
            pid = self.engine.container_state(self.container).get("Pid", 0)
            (self.slot / "worker.pid").write_text(str(pid))
            log.info("lease %s: worker runs in container %s of %s", self.lease_id, name, self.image)
        except (OSError, RadiumError) as exc:
            self.error = str(exc)
            log.error("lease %s: container worker of %s failed: %s", self.lease_id, self.image, exc)
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
                    raise RadiumError(
                        f"the worker container exited ({state.get('ExitCode')}): "
                        f"{output[-1] if output else state.get('Error') or 'no output'}"
                    ) from None
        raise RadiumError(f"the worker did not connect within {START_TIMEOUT:g}s")

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

    def hand_over(self, connection: socket.socket) -> None:
        self.ready.wait(START_TIMEOUT)
        if self.control is None:
            raise UnavailableError(
                f"the worker of lease {self.lease_id} in {self.image} did not start: {self.error}"
            )
        wire.send_fd(self.control, b"c", connection.fileno())

    def stop(self) -> None:
        if self.control is not None:
            self.control.close()
        self.listener.close()
        self.ready.wait(START_TIMEOUT)
        if self.container:
            self.engine.remove_container(self.container)
