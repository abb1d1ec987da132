"""The NVIDIA backend: GPUs found, checked and measured through NVML (``nvidia-ml-py``).

A GPU is the pool's device ``str(NVML index)``; a worker is pinned to it by UUID (indices
follow ``CUDA_DEVICE_ORDER`` and would name another GPU inside the worker). A GPU whose
queries fail, or whose memory has pending page retirement or row remapping, or volatile
uncorrectable ECC errors, is unhealthy: it is logged, kept out of :meth:`NvmlBackend.devices`
(so it is not registered, the pool places nothing on it and revokes leases it had; docs/gpus.md)
and shown by the ``radium_acceptor_device_healthy`` series.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

from radium.acceptor.devices import Gpu, GpuUse
from radium.acceptor.gpu_processes import measure
from radium.acceptor.limits import Share
from radium.acceptor.nvidia_files import driver_libraries, nvidia_nodes
from radium.errors import DeviceError
from radium.proto import pool_pb2 as pb

__all__ = ["NvmlBackend"]

log = logging.getLogger(__name__)
#: NVML error codes meaning "this GPU or driver has no such query", not "the GPU is broken".
_UNSUPPORTED = ("NVML_ERROR_NOT_SUPPORTED", "NVML_ERROR_FUNCTION_NOT_FOUND")


class NvmlBackend:
    """GPUs through ``nvml`` (the ``pynvml`` module, or a stand-in in tests)."""

    name = "nvml"

    def __init__(self, nvml: Any = None, root: Path = Path("/")) -> None:
        if nvml is None:
            try:
                import pynvml  # nvidia-ml-py
            except ImportError as exc:
                raise DeviceError(
                    "NVML is not usable here: nvidia-ml-py is not installed",
                    hint='install nvidia-ml-py, or set acceptor.backend = "cpu"',
                ) from exc
            nvml = pynvml
        self.nvml, self.root = nvml, root
        self._call("start", nvml.nvmlInit)
        self._unsupported = {getattr(nvml, code, -1) for code in _UNSUPPORTED}
        self._logged: dict[str, str] = {}  # device id -> health last logged
        self._seen: dict[str, int] = {}  # device id -> last process-utilisation sample (µs)
        self._libraries: list[tuple[str, str]] | None = None
        self._inventory = self._discover()

    def _call(self, what: str, function: Any, *args: Any) -> Any:
        """``function(*args)``, its NVMLError a DeviceError of one line."""
        try:
            return function(*args)
        except self.nvml.NVMLError as exc:
            raise DeviceError(
                f"NVML cannot {what}: {exc}",
                hint='check the NVIDIA driver (nvidia-smi), or set acceptor.backend = "cpu"',
            ) from exc

    def _discover(self) -> list[Gpu]:
        """Every GPU NVML lists, with its health; logs each change of health."""
        gpus = []
        for index in range(self._call("count the GPUs", self.nvml.nvmlDeviceGetCount)):
            gpu = self._probe(index)
            gpus.append(gpu)
            if self._logged.get(gpu.id) != gpu.health:
                level = logging.INFO if gpu.health == "ok" else logging.WARNING
                log.log(level, "GPU %s (%s): %s", gpu.id, gpu.uuid or "?", gpu.health)
                self._logged[gpu.id] = gpu.health
        return gpus

    def _probe(self, index: int) -> Gpu:
        nvml = self.nvml
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            name = nvml.nvmlDeviceGetName(handle)
            gpu = Gpu(
                id=str(index),
                uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
                model=_text(name),
                memory_mib=int(nvml.nvmlDeviceGetMemoryInfo(handle).total) >> 20,
                minor=int(nvml.nvmlDeviceGetMinorNumber(handle)),
                mig=self._mig(handle),
            )
        except nvml.NVMLError as exc:
            return Gpu(id=str(index), health=f"NVML cannot query it: {exc}")
        return dataclasses.replace(gpu, health=self._health(handle))

    def _optional(self, function: Any, *args: Any) -> Any:
        """``function(*args)``, or None where this GPU or driver does not support it."""
        try:
            return function(*args)
        except self.nvml.NVMLError as exc:
            if getattr(exc, "value", None) in self._unsupported:
                return None
            raise

    def _mig(self, handle: Any) -> str:
        mode = self._optional(self.nvml.nvmlDeviceGetMigMode, handle)
        if mode is None:
            return "unsupported"
        return "enabled" if mode[0] == self.nvml.NVML_DEVICE_MIG_ENABLE else "disabled"

    def _health(self, handle: Any) -> str:
        """Why the GPU must not take new work, or "ok" (each check only where supported)."""
        nvml = self.nvml
        try:
            pending = self._optional(nvml.nvmlDeviceGetRetiredPagesPendingStatus, handle)
            if pending == nvml.NVML_FEATURE_ENABLED:
                return "retired memory pages pending: reset the GPU"
            rows = self._optional(nvml.nvmlDeviceGetRemappedRows, handle)
            if rows is not None and rows[3]:
                return "memory row remapping failed"
            if rows is not None and rows[2]:
                return "memory row remapping pending: reset the GPU"
            ecc = self._optional(
                nvml.nvmlDeviceGetTotalEccErrors,
                handle,
                nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                nvml.NVML_VOLATILE_ECC,
            )
        except nvml.NVMLError as exc:
            return f"NVML cannot check its health: {exc}"
        if ecc:
            return f"{ecc} uncorrectable ECC errors since the driver loaded"
        return "ok"

    def gpus(self, device_ids: list[str] | None = None) -> list[Gpu]:
        """The GPUs of these device ids (all of them, unhealthy ones too, for None)."""
        if device_ids is None:
            return list(self._inventory)
        known = {gpu.id: gpu for gpu in self._inventory}
        missing = [i for i in device_ids if i not in known]
        if missing:
            raise DeviceError(f"this acceptor has no GPU {', '.join(missing)}")
        return [known[i] for i in device_ids]

    def devices(self) -> list[pb.Device]:
        """The healthy GPUs, checked anew (registration and each scrape call this)."""
        self._inventory = self._discover()
        return [_device(gpu) for gpu in self._inventory if gpu.health == "ok"]

    def visible_devices_env(self, device_ids: list[str]) -> dict[str, str]:
        uuids = ",".join(gpu.uuid for gpu in self.gpus(device_ids))
        return {"CUDA_VISIBLE_DEVICES": uuids, "NVIDIA_VISIBLE_DEVICES": uuids}

    def share(self, device_ids: list[str], fraction: float, memory_mib: int) -> Share:
        # The lease's memory and fraction are the GPU's (MPS enforces them), not host
        # limits: the worker's host CPU and memory stay unlimited.
        return Share()

    def device_nodes(self, device_ids: list[str]) -> list[str]:
        return nvidia_nodes([gpu.minor for gpu in self.gpus(device_ids)], self.root)

    def driver_files(self) -> list[tuple[str, str]]:
        # Read once: a new driver needs a new acceptor anyway (NVML refuses a mismatch).
        if self._libraries is None:
            self._libraries = driver_libraries(self.root)
            if not self._libraries:
                log.warning("the loader cache names no NVIDIA driver library: run ldconfig")
            log.info("driver libraries for workers: %s", " ".join(r for _, r in self._libraries))
        return self._libraries

    def utilization(self) -> dict[str, tuple[float, int]] | None:
        measured = {}
        for gpu in self._inventory:
            try:
                handle = self.nvml.nvmlDeviceGetHandleByIndex(int(gpu.id))
                busy = self.nvml.nvmlDeviceGetUtilizationRates(handle).gpu / 100
                used = int(self.nvml.nvmlDeviceGetMemoryInfo(handle).used)
            except self.nvml.NVMLError as exc:
                log.debug("GPU %s: no utilisation: %s", gpu.id, exc)
                continue
            measured[gpu.id] = (busy, used)
        return measured

    def processes(self) -> dict[int, GpuUse]:
        """Host pid -> what it uses of the GPUs (summed over them); see :mod:`gpu_processes`."""
        return measure(self.nvml, self._inventory, self._seen)


def _device(gpu: Gpu) -> pb.Device:
    """The device the pool is told about, labelled for selectors and for sharing (MPS)."""
    labels = {"backend": "nvml", "uuid": gpu.uuid, "mig": gpu.mig}
    labels.update(minor=str(gpu.minor), health=gpu.health)
    return pb.Device(
        id=gpu.id, vendor="nvidia", model=gpu.model, memory_mib=gpu.memory_mib, labels=labels
    )


def _text(value: Any) -> str:
    """NVML strings are bytes in older nvidia-ml-py releases."""
    return value.decode() if isinstance(value, bytes) else str(value)
