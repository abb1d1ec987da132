"""A claim's share of a device asked as consumable capacity (``capacity: {requests: {memory}}``).

Radium's slices offer each device's ``memory`` as consumable capacity (:mod:`radium.dra.slices`).
A request that names a memory amount gets a share: the scheduler writes what it consumed in the
allocation's ``consumedCapacity`` (its request rounded up by the device's policy), and that is
the lease's ``radium.io/memory``. A request that names none consumes the whole device (the
capacity's default), which is a whole-device lease.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any

from radium.errors import SpecError

__all__ = ["consumed_memory_mib", "mebibytes"]

_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
_FACTORS = {
    None: 1,
    "Ki": 1 << 10,
    "Mi": 1 << 20,
    "Gi": 1 << 30,
    "Ti": 1 << 40,
    "Pi": 1 << 50,
    "Ei": 1 << 60,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
}


def mebibytes(quantity: object, what: str) -> int:
    """A Kubernetes quantity of bytes (``20Gi``, ``512Mi``, ``1.5G``; not an exponent form
    such as ``1e9``) in MiB, rounded up; a ``SpecError`` naming ``what`` when it is not one."""
    match = _QUANTITY.match(quantity) if isinstance(quantity, str) else None
    if match is None:
        raise SpecError(f"{what}: {quantity!r} is not a memory quantity such as 20Gi or 512Mi")
    amount = Decimal(match.group(1)) * _FACTORS[match.group(2)]
    mib = math.ceil(amount / (1 << 20))
    if mib <= 0:
        raise SpecError(f"{what}: a memory share must be positive, got {quantity!r}")
    return mib


def consumed_memory_mib(
    resource_claim: dict[str, Any], result: dict[str, Any], what: str
) -> int | None:
    """The MiB of memory ``result`` (one allocated device) consumed when its request asked for
    a memory share; None when it asked for none: the whole device."""
    if not _asks_memory(resource_claim, str(result.get("request", ""))):
        return None
    consumed = result.get("consumedCapacity")
    memory = consumed.get("memory") if isinstance(consumed, dict) else None
    if memory is None:
        raise SpecError(f"{what} asks for a memory share the scheduler did not record")
    return mebibytes(memory, what)


def _asks_memory(resource_claim: dict[str, Any], name: str) -> bool:
    """Whether the claim's request ``name`` (``request`` or ``request/subrequest``) names a
    memory amount in its capacity requests."""
    head, _, sub = name.partition("/")
    spec = resource_claim.get("spec")
    devices = spec.get("devices") if isinstance(spec, dict) else None
    requests = devices.get("requests") if isinstance(devices, dict) else None
    for request in requests if isinstance(requests, list) else []:
        if not isinstance(request, dict) or request.get("name") != head:
            continue
        if sub:
            chosen = [
                s
                for s in request.get("firstAvailable") or []
                if isinstance(s, dict) and s.get("name") == sub
            ]
            exact = chosen[0] if chosen else {}
        else:
            exact = request.get("exactly") or {}
        capacity = exact.get("capacity") if isinstance(exact, dict) else None
        asked = capacity.get("requests") if isinstance(capacity, dict) else None
        return isinstance(asked, dict) and "memory" in asked
    return False
