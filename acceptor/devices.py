"""Device inventory backends: NVIDIA through NVML when present, and a CPU backend.

The CPU backend exposes a configurable number of "devices" with a memory size, so that the whole
system runs (and is tested) on machines without accelerators.
"""

from __future__ import annotations

import logging
import platform
from pathlib import Path
from typing import Protocol

from radium.acceptor.limits import Share
from radium.config import AcceptorConfig
from radium.errors import RadiumError
from radium.proto import pool_pb2 as pb

log = logging.getLogger(__name__)


class Backend(Protocol):
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


class CpuBackend:
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


class NvmlBackend:
    name = "nvml"

    def __init__(self) -> None:
        try:
            import pynvml  # nvidia-ml-py

            pynvml.nvmlInit()
        except Exception as exc:  # ImportError, or NVMLError when there is no driver
            raise RadiumError(
                f"NVML is not usable here: {exc}",
                hint='install nvidia-ml-py and the NVIDIA driver, or use acceptor.backend = "cpu"',
            ) from exc
        self._nvml = pynvml

    def devices(self) -> list[pb.Device]:
        nvml = self._nvml
        found = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            name = nvml.nvmlDeviceGetName(handle)
            memory = nvml.nvmlDeviceGetMemoryInfo(handle).total // (1024 * 1024)
            found.append(
                pb.Device(
                    id=str(index),
                    vendor="nvidia",
                    model=name if isinstance(name, str) else name.decode(),
                    memory_mib=memory,
                    labels={"backend": "nvml", "uuid": str(nvml.nvmlDeviceGetUUID(handle))},
                )
            )
        return found

    def visible_devices_env(self, device_ids: list[str]) -> dict[str, str]:
        return {
            "CUDA_VISIBLE_DEVICES": ",".join(device_ids),
            "NVIDIA_VISIBLE_DEVICES": ",".join(device_ids),
        }

    def share(self, device_ids: list[str], fraction: float, memory_mib: int) -> Share:
        # The lease's memory and fraction are the GPU's (MPS limits: not enforced yet), not
        # host limits: the worker's host CPU and memory stay unlimited.
        return Share()

    def device_nodes(self, device_ids: list[str]) -> list[str]:
        nvml = self._nvml
        minors = [
            nvml.nvmlDeviceGetMinorNumber(nvml.nvmlDeviceGetHandleByIndex(int(i)))
            for i in device_ids
        ]
        return nvidia_nodes(minors)

    def utilization(self) -> dict[str, tuple[float, int]] | None:
        nvml, measured = self._nvml, {}
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            busy = nvml.nvmlDeviceGetUtilizationRates(handle).gpu / 100
            measured[str(index)] = (busy, int(nvml.nvmlDeviceGetMemoryInfo(handle).used))
        return measured


def nvidia_nodes(minors: list[int], dev: Path = Path("/dev")) -> list[str]:
    """The control nodes every CUDA process opens, plus one node per GPU (by minor number)."""
    names = ["nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", *(f"nvidia{m}" for m in minors)]
    return [str(dev / name) for name in names if (dev / name).exists()]


def choose(config: AcceptorConfig) -> Backend:
    if config.backend in ("auto", "nvml"):
        try:
            return NvmlBackend()
        except RadiumError as exc:
            if config.backend == "nvml":
                raise
            log.info("%s; using the CPU backend", exc.message)
    return CpuBackend(config.cpu_devices, config.cpu_memory_mib)
