"""A stand-in for nvidia-ml-py's ``pynvml`` (no GPU here): the calls the NVIDIA backend makes,
answered from scripted GPUs the way the real library answers (its error type and codes, its
per-process records, ``NVML_ERROR_NOT_FOUND`` when no utilisation sample is new)."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any


class NVMLError(Exception):
    """As pynvml's: ``value`` is the NVML return code, ``str()`` its description."""

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        names = {3: "Not Supported", 6: "Not Found", 9: "Driver Not Loaded", 15: "GPU is lost"}
        return names.get(self.value, "Unknown Error")


@dataclass
class FakeGpu:
    uuid: str
    minor: int
    name: str = "NVIDIA H100 80GB HBM3"
    total: int = 80 << 30
    used: int = 0
    busy: int = 0
    #: [current, pending]; None: MIG not supported (raises NOT_SUPPORTED)
    mig: list[int] | None = field(default_factory=lambda: [0, 0])
    retired_pending: int | None = 0  # None: not supported (H100 remaps rows instead)
    rows: tuple[int, int, int, int] = (0, 0, 0, 0)
    volatile_uncorrected: int = 0
    lost: bool = False  # every query fails with GPU_IS_LOST
    #: (pid, bytes or None) of nvmlDeviceGetComputeRunningProcesses and the MPS listing
    compute: list[tuple[int, int | None]] = field(default_factory=list)
    mps: list[tuple[int, int | None]] = field(default_factory=list)
    #: (pid, time stamp µs, SM %) of nvmlDeviceGetProcessUtilization
    samples: list[tuple[int, int, int]] = field(default_factory=list)


class FakeNvml:
    NVMLError = NVMLError
    NVML_ERROR_NOT_SUPPORTED = 3
    NVML_ERROR_NOT_FOUND = 6
    NVML_ERROR_GPU_IS_LOST = 15
    NVML_ERROR_FUNCTION_NOT_FOUND = 13
    NVML_DEVICE_MIG_ENABLE = 1
    NVML_FEATURE_ENABLED = 1
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_VOLATILE_ECC = 0

    def __init__(self, *gpus: FakeGpu, init_fails: bool = False) -> None:
        self.gpus = list(gpus)
        self.init_fails = init_fails
        self.asked: list[tuple[str, Any]] = []  # (call, time stamp) of utilisation queries

    def nvmlInit(self) -> None:
        if self.init_fails:
            raise NVMLError(9)  # NVML_ERROR_DRIVER_NOT_LOADED

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:
        return self.gpus[index]

    def _ok(self, gpu: FakeGpu) -> FakeGpu:
        if gpu.lost:
            raise NVMLError(self.NVML_ERROR_GPU_IS_LOST)
        return gpu

    def nvmlDeviceGetName(self, gpu: FakeGpu) -> bytes:
        return self._ok(gpu).name.encode()  # bytes, as older releases answer

    def nvmlDeviceGetUUID(self, gpu: FakeGpu) -> str:
        return self._ok(gpu).uuid

    def nvmlDeviceGetMemoryInfo(self, gpu: FakeGpu) -> SimpleNamespace:
        return SimpleNamespace(total=self._ok(gpu).total, used=gpu.used, free=gpu.total - gpu.used)

    def nvmlDeviceGetMinorNumber(self, gpu: FakeGpu) -> int:
        return self._ok(gpu).minor

    def nvmlDeviceGetMigMode(self, gpu: FakeGpu) -> list[int]:
        if self._ok(gpu).mig is None:
            raise NVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        return list(gpu.mig or ())

    def nvmlDeviceGetRetiredPagesPendingStatus(self, gpu: FakeGpu) -> int:
        if self._ok(gpu).retired_pending is None:
            raise NVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        return int(gpu.retired_pending or 0)

    def nvmlDeviceGetRemappedRows(self, gpu: FakeGpu) -> tuple[int, int, int, int]:
        return self._ok(gpu).rows

    def nvmlDeviceGetTotalEccErrors(self, gpu: FakeGpu, kind: int, counter: int) -> int:
        assert (kind, counter) == (1, 0)  # uncorrected, volatile: what the backend checks
        return self._ok(gpu).volatile_uncorrected

    def nvmlDeviceGetUtilizationRates(self, gpu: FakeGpu) -> SimpleNamespace:
        return SimpleNamespace(gpu=self._ok(gpu).busy, memory=0)

    def nvmlDeviceGetComputeRunningProcesses(self, gpu: FakeGpu) -> list[SimpleNamespace]:
        return [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in self._ok(gpu).compute]

    def nvmlDeviceGetMPSComputeRunningProcesses(self, gpu: FakeGpu) -> list[SimpleNamespace]:
        return [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in self._ok(gpu).mps]

    def nvmlDeviceGetProcessUtilization(self, gpu: FakeGpu, since: int) -> list[SimpleNamespace]:
        self.asked.append(("utilization", since))
        new = [s for s in self._ok(gpu).samples if s[1] > since]
        if not new:
            raise NVMLError(self.NVML_ERROR_NOT_FOUND)
        return [SimpleNamespace(pid=p, timeStamp=t, smUtil=sm, memUtil=0) for p, t, sm in new]
