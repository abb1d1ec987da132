"""How a slot's worker is started and ended: its mode, its confinement and its host limits.

:class:`radium.acceptor.slots.Slots` decides *when* (a lease's first connection, its grant for a
container-mode worker, its teardown) and keeps the records; this module decides *what*: a
process-mode worker under the sandbox and the lease's cgroups, or a container-mode one in the
lease's image, and, when the lease ends, what is left of it to kill: what runs in its own
cgroups, or its container, never every process of its uid (docs/security.md).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Union

import psutil

from radium.acceptor.container_worker import ContainerRuntime, ContainerWorker
from radium.acceptor.engines import Engine
from radium.acceptor.limits import Cgroups, Share
from radium.acceptor.record import SlotRecord
from radium.acceptor.sandbox import Sandbox, Tenant
from radium.acceptor.worker_output import Budget, oom_kills
from radium.acceptor.workers import ProcessWorker
from radium.errors import RadiumError

if TYPE_CHECKING:
    from radium.acceptor.devices import Backend
    from radium.acceptor.gpu_sharing import Sharing

__all__ = ["Launcher", "Worker", "worker_pid"]

log = logging.getLogger(__name__)
Worker = Union[ProcessWorker, ContainerWorker]


def worker_pid(slot: Path) -> int | None:
    """The pid the slot's worker wrote (bubblewrap's, or the container's init)."""
    try:
        return int((slot / "worker.pid").read_text().strip())
    except (OSError, ValueError):
        return None


class Launcher:
    """Starts and ends lease workers on ``backend``'s devices. Without a sandbox workers run
    unconfined as root (tests only); with a docker engine, a lease whose image it holds gets a
    container-mode worker."""

    def __init__(
        self,
        backend: Backend | None,
        sandbox: Sandbox | None,
        limits: Cgroups | None,
        engine: Engine | None,
    ) -> None:
        self.backend, self.sandbox, self.limits = backend, sandbox, limits
        #: The engine that runs container-mode workers, chosen once: None when there is no
        #: engine or it cannot run containers (containerd's only pulls).
        self.containers: ContainerRuntime | None = None
        if isinstance(engine, ContainerRuntime):
            self.containers = engine
        #: How fractional leases share a GPU (MPS environment and pipe directory); set by Slots.
        self.sharing: Sharing | None = None
        #: lease id -> its workers' lines in the log (a tenant's crash loop shares one budget)
        self.budgets: dict[str, Budget] = {}

    def starts_at_grant(self, image: str, worker: str) -> bool:
        """A lease whose worker may be a container (the engine decides) starts it at grant."""
        return self.backend is not None and bool(image) and worker != "process"

    def start(self, record: SlotRecord, slot: Path) -> tuple[Worker, list[str]]:
        """A new worker for the lease, and the host limits put on it (for the log)."""
        tenant = self._tenant(record, slot / "home")
        image = self._container_image(record)
        budget = self.budgets.setdefault(record.id, Budget())
        if image and self.containers is not None:
            worker = ContainerWorker(
                tenant, slot, self.containers, image, self.sandbox, budget=budget
            )
            return worker, []
        applied: list[str] = []
        limits = self.limits

        def join(pid: int) -> None:
            if limits is not None:
                applied.extend(limits.apply(record.id, pid, tenant.share))

        def oom() -> int:  # the report of a worker's end names its memory cap
            return oom_kills(limits._dirs(record.id).values()) if limits else 0

        return ProcessWorker(tenant, slot, self.sandbox, join, oom, budget), applied

    def end(self, lease_id: str, slot: Path, record: SlotRecord | None, lost: bool) -> bool:
        """Kill what is left of the lease's worker (``lost``: this acceptor has no hold of it,
        a restart came between): what runs in its own cgroups, and a container an earlier run
        of this acceptor left; never every process of its uid, which is the lease's alone only
        as long as its lock is held. True when nothing of it is left."""
        self.budgets.pop(lease_id, None)
        if self.sandbox is None:  # unconfined (tests): root workers, the pid is all there is
            pid = worker_pid(slot)
            if pid is not None:
                with contextlib.suppress(psutil.Error):
                    psutil.Process(pid).kill()
        elif (
            lost
            and record
            and self.starts_at_grant(record.image, record.worker)
            and self.containers is not None
        ):  # by the name ContainerWorker gives it
            self.containers.remove_container(f"radium-worker-{lease_id}")
        if self.limits is None:
            return True  # a process-mode worker's sandbox died with its bubblewrap
        ended = self.limits.kill(lease_id)
        self.limits.remove(lease_id)
        return ended

    def _container_image(self, record: SlotRecord) -> str:
        """The image to run the worker in, or "" for process mode (and why, logged)."""
        if not record.image or record.worker == "process":
            return ""
        if self.containers is None:
            reason = "this acceptor has no docker engine"
        else:
            try:
                held = self.containers.digest(record.image) is not None
            except RadiumError as exc:
                held, reason = False, exc.message
            else:
                reason = "" if held else f"{record.image} is not pulled here (radium images add)"
            if held:
                return record.image
        level = logging.WARNING if record.worker == "container" else logging.INFO
        log.log(level, "lease %s: process-mode worker: %s", record.id, reason)
        return ""

    def _tenant(self, record: SlotRecord, home: Path) -> Tenant:
        assert self.backend is not None
        devices = list(record.devices)
        share = Share()  # unconfined workers are not limited either (tests of the probes)
        if self.sandbox is not None:
            share = dataclasses.replace(
                self.backend.share(devices, record.fraction, record.memory_mib),
                processes=self.sandbox.config.max_processes,
            )
        mps: dict[str, str] = {}
        if self.sharing is not None:
            mps = self.sharing.env(devices, record.fraction, record.memory_mib)
        return Tenant(
            lease_id=record.id,
            uid=record.uid,
            home=home,
            env={**self.backend.visible_devices_env(devices), **mps, "RADIUM_LEASE_ID": record.id},
            binds=self.sharing.binds(mps) if self.sharing is not None else (),
            devices=tuple(self.backend.device_nodes(devices)),
            share=share,
            libraries=tuple(self.backend.driver_files()) if devices else (),
        )
