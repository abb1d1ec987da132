"""Device inventory backends: what a backend answers (:class:`Backend`) and the CPU backend.
NVIDIA's is :mod:`radium.acceptor.nvidia`; the daemon's :func:`~radium.acceptor.daemon.choose`
picks one.

The CPU backend exposes a configurable number of "devices" with a memory size, so that the whole
system runs (and is tested) on machines without accelerators.
"""

from __future__ import annotations

import logging
import platform
from dataclasses import dataclass
from typing import Protocol

from radium.acceptor.limits import Share
from radium.proto import pool_pb2 as pb

__all__ = ["Backend", "CpuBackend", "Gpu", "GpuUse"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Gpu:
    """One GPU as its vendor library describes it (vendor-neutral: what sharing, confinement
    and health need to know of it)."""

    #: The pool's device id (NVIDIA: the NVML index, as a string).
    id: str
    uuid: str = ""
    model: str = "unknown"
    memory_mib: int = 0
    #: Its device node's minor number (``/dev/nvidia<minor>``); -1 when unknown.
    minor: int = -1
    #: "enabled", "disabled", or "unsupported" (MIG mode, current).
    mig: str = "unsupported"
    #: "ok", or why it must not take new leases (one line).
    health: str = "ok"

    @property
    def mig_enabled(self) -> bool:
        return self.mig == "enabled"


@dataclass(frozen=True)
class GpuUse:
    """What one host process uses of the GPUs: memory, and SM (streaming multiprocessor)
    utilisation in percent of one GPU, each summed over the GPUs it uses."""

    memory_bytes: int = 0
    sm_percent: float = 0.0


class Backend(Protocol):
    """What a device backend answers: its devices, their use, and what a worker needs to reach one.
    What a device backend answers: its devices, their use, and what a worker needs to reach one."""

    name: str

    def devices(self) -> list[pb.Device]: ...

    def visible_devices_env(self, device_ids: list[str]) -> dict[str, str]:
        """Environment that pins a worker to these devices."""
        ...

    def share(self, device_ids: list[str], fraction: float, memory_mib: int) -> Share:
        """The host CPU and memory a worker of such a lease may use (cgroup limits)."""
        ...

    def device_nodes(self, device_ids: list[str]) -> list[str]:
        """The host device nodes a worker of these devices needs, and no other (the sandbox)."""
        ...

    def utilization(self) -> dict[str, tuple[float, int]] | None:
        """Device id -> (share busy, memory used in bytes), measured by the vendor's library;
        None when the backend has none (the metrics then use the workers' figures)."""
        ...

    def gpus(self, device_ids: list[str] | None = None) -> list[Gpu]:
        """The GPUs behind these device ids (all of them for None; [] for CPU devices): their
        UUIDs, minors, MIG mode and health, for whoever confines or shares them (MPS)."""
        ...

    def driver_files(self) -> list[tuple[str, str]]:
        """(path, real file) of the vendor's user-space driver libraries a worker needs, bound
        read-only into process-mode sandboxes; [] when none."""
        ...

    def processes(self) -> dict[int, GpuUse] | None:
        """Host pid -> what it uses of the devices, measured by the vendor's library; None
        when the backend measures no processes."""
        ...


class CpuBackend:
    """``count`` CPU "devices" of ``memory_mib`` each: one core's worth of time per device."""

    name = "cpu"

    def __init__(self, count: int, memory_mib: int) -> None:
        self.count, self.memory_mib = count, memory_mib

    def devices(self) -> list[pb.Device]:
        model = platform.processor() or platform.machine()
        return [
            pb.Device(
                id=f"cpu{i}",
                vendor="cpu",
                model=model,
                memory_mib=self.memory_mib,
                labels={"backend": "cpu"},
            )
            for i in range(self.count)
        ]

    def visible_devices_env(self, device_ids: list[str]) -> dict[str, str]:
        return {"RADIUM_VISIBLE_DEVICES": ",".join(device_ids)}

    def share(self, device_ids: list[str], fraction: float, memory_mib: int) -> Share:
        # A CPU "device" is one CPU's worth of time; a fraction is a share of one.
        cpus = fraction if fraction else float(len(device_ids))
        return Share(memory_mib=memory_mib, cpus=cpus)

    def device_nodes(self, device_ids: list[str]) -> list[str]:
        return []

    def utilization(self) -> dict[str, tuple[float, int]] | None:
        return None

    def gpus(self, device_ids: list[str] | None = None) -> list[Gpu]:
        return []

    def driver_files(self) -> list[tuple[str, str]]:
        return []

    def processes(self) -> dict[int, GpuUse] | None:
        return None
