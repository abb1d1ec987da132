"""Placement: which devices of which acceptor serve a request. Pure: no I/O, no clock.

Whole GPUs go to the up acceptor whose matching free devices fit the count most tightly (so big
requests keep finding room); fractions and memory go to the device whose free memory fits most
tightly (bin-packing). Memory is never over-committed. Queues, quotas and preemption will
replace this module, not grow it.
"""

from __future__ import annotations

import math
from typing import Iterable

from radium.errors import CapacityError, InvalidRequestError
from radium.pool.model import MAX_GPUS, AcceptorState, DeviceState, Placement, Request


def validate(request: Request) -> None:
    if request.gpus and (request.fraction or request.memory_mib):
        raise InvalidRequestError("ask for whole GPUs or a part of one, not both")
    if request.gpus > MAX_GPUS:
        raise InvalidRequestError(
            f"{request.gpus} GPUs is more than any pool serves (at most {MAX_GPUS})"
        )
    if request.fraction and request.memory_mib:
        raise InvalidRequestError("ask for a fraction or for memory, not both")
    if not (math.isfinite(request.fraction) and 0.0 <= request.fraction <= 1.0):
        raise InvalidRequestError(f"fraction must be in (0, 1], got {request.fraction}")
    if not (request.gpus or request.fraction or request.memory_mib):
        raise InvalidRequestError(
            "ask for at least 1 GPU, a fraction in (0, 1], or some memory (MiB)"
        )
    if (
        not math.isfinite(request.wait)
        or request.wait < 0
        or not math.isfinite(request.ttl)
        or request.ttl < 0
    ):
        raise InvalidRequestError("wait and ttl must be finite and not negative")


def _matches(acceptor: AcceptorState, state: DeviceState, request: Request) -> bool:
    device = state.device
    if device.memory_mib < request.min_memory_mib:
        return False
    for key, wanted in request.selector.items():
        have = {"vendor": device.vendor, "model": device.model, "acceptor": acceptor.name}.get(key)
        if have is None:
            have = device.labels.get(key, acceptor.labels.get(key))
        if have != wanted:
            return False
    return True


def _need(state: DeviceState, request: Request) -> int:
    if request.memory_mib:
        return request.memory_mib
    return max(1, math.ceil(request.fraction * state.device.memory_mib))


def place(request: Request, acceptors: Iterable[AcceptorState]) -> Placement:
    """The placement for ``request``; CapacityError saying what is free when there is none."""
    validate(request)
    candidates = [
        (acceptor, state)
        for acceptor in acceptors
        for state in acceptor.devices.values()
        if _matches(acceptor, state, request)
    ]
    if not candidates:
        raise InvalidRequestError(f"no device in the pool matches {request.describe()}")
    up = [(a, s) for a, s in candidates if a.serving]
    placement = _place_whole(request, up) if request.gpus else _place_part(request, up)
    if placement is None:
        raise CapacityError(f"no capacity for {request.describe()}: {_free_summary(up)}")
    return placement


def _place_whole(
    request: Request, candidates: list[tuple[AcceptorState, DeviceState]]
) -> Placement | None:
    free: dict[str, list[DeviceState]] = {}
    for acceptor, state in candidates:
        if state.used_mib == 0:
            free.setdefault(acceptor.name, []).append(state)
    fitting = [
        (len(states) - request.gpus, name)
        for name, states in free.items()
        if len(states) >= request.gpus
    ]
    if not fitting:
        return None
    _, name = min(fitting)
    chosen = sorted(free[name], key=lambda s: s.device.id)[: request.gpus]
    return Placement(name, {s.device.id: s.device.memory_mib for s in chosen}, 1.0)


def _place_part(
    request: Request, candidates: list[tuple[AcceptorState, DeviceState]]
) -> Placement | None:
    fitting = [
        (state.free_mib - _need(state, request), acceptor.name, state.device.id, state)
        for acceptor, state in candidates
        if state.free_mib >= _need(state, request)
    ]
    if not fitting:
        return None
    _, name, device_id, state = min(fitting, key=lambda f: f[:3])
    need = _need(state, request)
    return Placement(name, {device_id: need}, need / state.device.memory_mib)


def _free_summary(candidates: list[tuple[AcceptorState, DeviceState]]) -> str:
    if not candidates:
        return "no matching acceptor is up"
    whole = sum(1 for _, s in candidates if s.used_mib == 0)
    best = max(s.free_mib for _, s in candidates)
    plural = "s" if whole != 1 else ""
    return f"{whole} matching GPU{plural} wholly free, at most {best} MiB free on one"
