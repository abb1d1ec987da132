"""What each host process uses of the NVIDIA GPUs, from NVML's per-process figures.

Memory: ``nvmlDeviceGetComputeRunningProcesses`` lists every CUDA process with the device
memory it holds; under MPS it lists the MPS server and its clients, and
``nvmlDeviceGetMPSComputeRunningProcesses`` the clients alone (a pid in both counts once).
SM utilisation: ``nvmlDeviceGetProcessUtilization`` gives samples per process since a time
stamp; under MPS its only process is the MPS server (the clients' kernels run in the server's
context), so a fractional lease's SM share is not measurable per lease and its figure stays 0;
the GPU's own utilisation (``radium_acceptor_device_utilization_ratio``) still counts it.
The acceptor maps pids to leases (:mod:`radium.acceptor.usage`).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any

from radium.acceptor.devices import Gpu, GpuUse

__all__ = ["measure"]

log = logging.getLogger(__name__)
#: Per-process listings; the MPS one is missing from older drivers (then only the first).
_LISTINGS = ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetMPSComputeRunningProcesses")


def measure(nvml: Any, gpus: list[Gpu], seen: dict[str, int]) -> dict[int, GpuUse]:
    """Host pid -> its memory on and SM utilisation of ``gpus`` (healthy ones), summed over
    them. ``seen`` keeps each GPU's newest utilisation sample between calls, so each call
    averages the samples taken since the one before."""
    memory: dict[int, int] = defaultdict(int)
    busy: dict[int, float] = defaultdict(float)
    for gpu in gpus:
        if gpu.health != "ok":
            continue
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(int(gpu.id))
            for pid, used in _memory(nvml, handle).items():
                memory[pid] += used
            for pid, share in _utilisation(nvml, handle, gpu.id, seen).items():
                busy[pid] += share
        except nvml.NVMLError as exc:  # a heartbeat reports what it can
            log.debug("GPU %s: no per-process figures: %s", gpu.id, exc)
    return {
        pid: GpuUse(memory_bytes=memory.get(pid, 0), sm_percent=busy.get(pid, 0.0))
        for pid in set(memory) | set(busy)
    }


def _memory(nvml: Any, handle: Any) -> dict[int, int]:
    held: dict[int, int] = {}
    for name in _LISTINGS:
        function = getattr(nvml, name, None)
        if function is None:
            continue
        for process in _optional(nvml, function, handle) or ():
            used = process.usedGpuMemory or 0  # None: not available (e.g. under MIG)
            held[int(process.pid)] = max(held.get(int(process.pid), 0), int(used))
    return held


def _utilisation(nvml: Any, handle: Any, gpu: str, seen: dict[str, int]) -> dict[int, float]:
    samples = _optional(nvml, nvml.nvmlDeviceGetProcessUtilization, handle, seen.get(gpu, 0))
    if not samples:
        return {}
    seen[gpu] = max(int(sample.timeStamp) for sample in samples)
    values: dict[int, list[float]] = defaultdict(list)
    for sample in samples:
        values[int(sample.pid)].append(float(sample.smUtil))
    return {pid: sum(v) / len(v) for pid, v in values.items()}


def _optional(nvml: Any, function: Any, *args: Any) -> Any:
    """``function(*args)``; None where NVML has nothing to say (no samples since the time
    stamp, or no such query on this GPU or driver)."""
    quiet = {
        getattr(nvml, code, -1)
        for code in ("NVML_ERROR_NOT_FOUND", "NVML_ERROR_NOT_SUPPORTED",
                     "NVML_ERROR_FUNCTION_NOT_FOUND")
    }  # fmt: skip
    try:
        return function(*args)
    except nvml.NVMLError as exc:
        if getattr(exc, "value", None) in quiet:
            return None
        raise
