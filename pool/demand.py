"""What a request asks and what a device is, as small hashable values the placer compares:
demands, device kinds, and whether a selector matches."""

from __future__ import annotations

import math
from typing import Iterable, Mapping

from radium.pool.model import AcceptorState, Device, Request

#: (vendor, model, memory_mib, label items): what a selector can ask of a device.
Kind = tuple[str, str, int, tuple[tuple[str, str], ...]]
#: What a request asks, without who asks: (gpus, fraction, memory_mib, cpu_milli,
#: min_memory_mib, selector items without "acceptor").
Demand = tuple[int, float, int, int, int, tuple[tuple[str, str], ...]]


def demand_of(request: Request) -> Demand:
    selector = tuple(sorted((k, v) for k, v in request.selector.items() if k != "acceptor"))
    return (
        request.gpus,
        request.fraction,
        request.memory_mib,
        request.cpu_milli,
        request.min_memory_mib,
        selector,
    )


def need_mib(demand: Demand, memory_mib: int) -> int:
    """MiB a demand takes on one device of this size (all of it for whole GPUs)."""
    gpus, fraction, memory, _, _, _ = demand
    if gpus:
        return memory_mib
    if memory:
        return memory
    # The epsilon keeps float noise (0.47 * 16000 = 7520.000000000001) from costing a MiB.
    return max(1, math.ceil(fraction * memory_mib - 1e-6))


def value_matches(wanted: str, have: str | None) -> bool:
    """A selector value may list alternatives: ``model=T4|A10``."""
    return have is not None and (have == wanted or ("|" in wanted and have in wanted.split("|")))


def kind_of(device: Device) -> Kind:
    return (device.vendor, device.model, device.memory_mib, tuple(sorted(device.labels.items())))


def matches(acceptor: AcceptorState, device: Device, request: Request) -> bool:
    """Whether a request may have this device of this acceptor (up or not)."""
    wanted = named(request)
    if wanted is not None and acceptor.name not in wanted:
        return False
    return kind_matches(
        kind_of(device), acceptor.labels, request.min_memory_mib, demand_of(request)[5]
    )


def kind_matches(
    kind: Kind, labels: Mapping[str, str], min_memory: int, selector: Iterable[tuple[str, str]]
) -> bool:
    """Whether a device of this kind, on an acceptor with these labels, fits the selector."""
    vendor, model, memory, device_labels = kind
    if memory < min_memory:
        return False
    for key, wanted in selector:
        if key == "vendor":
            have: str | None = vendor
        elif key == "model":
            have = model
        else:
            have = dict(device_labels).get(key, labels.get(key))
        if not value_matches(wanted, have):
            return False
    return True


def named(request: Request) -> set[str] | None:
    """The acceptors a request names (``acceptor=a|b``), or None when it names none."""
    wanted = request.selector.get("acceptor")
    return set(wanted.split("|")) if wanted is not None else None
