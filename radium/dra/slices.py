"""The ResourceSlices of the ``radium.io`` driver: the pool's devices, as the scheduler sees them.

A Radium GPU is reached through the node agent from any node, so the devices are published
once for the cluster (``allNodes: true``), not per node: a per-node slice would count every
pool GPU once per node. One DRA pool (``--pool``, default ``radium``) holds one slice per
serving acceptor, each device its GPU with ``allowMultipleAllocations`` and a consumable
``memory`` capacity: a claim that asks no capacity takes the whole device, one that asks
``capacity: {requests: {memory: 20Gi}}`` a share, and the scheduler packs shares on a device
until its memory is spent (docs/kubernetes.md, "ResourceSlices").
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, Iterable

from radium.dra.paths import DRIVER

__all__ = ["API_VERSION", "POOL_LABEL", "PoolDevice", "dns_label", "slices"]

API_VERSION = "resource.k8s.io/v1"
#: The label on every slice Radium publishes: which DRA pool it belongs to.
POOL_LABEL = f"{DRIVER}/pool"
_NOT_LABEL = re.compile(r"[^a-z0-9-]+")


@dataclass(frozen=True)
class PoolDevice:
    """One device of a serving acceptor, as the pool's status reports it."""

    acceptor: str
    id: str
    vendor: str
    model: str
    memory_mib: int


def dns_label(text: str, most: int = 63) -> str:
    """``text`` as a DNS label (a device's name): lower case, ``-`` for anything else, at most
    ``most`` characters; a name that had to change ends in a hash of the original, so two
    names that fold alike stay apart."""
    folded = _NOT_LABEL.sub("-", text.lower()).strip("-")
    if folded == text and len(text) <= most:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{folded[: most - 9].rstrip('-')}-{digest}".lstrip("-")


def slices(devices: Iterable[PoolDevice], pool: str, generation: int) -> list[dict[str, Any]]:
    """The ResourceSlice objects of ``pool`` at ``generation``: one per acceptor, sorted."""
    by_acceptor: dict[str, list[PoolDevice]] = {}
    for device in devices:
        by_acceptor.setdefault(device.acceptor, []).append(device)
    count = len(by_acceptor)
    return [
        {
            "apiVersion": API_VERSION,
            "kind": "ResourceSlice",
            "metadata": {
                "name": f"{DRIVER}-{dns_label(pool)}-{dns_label(acceptor)}",
                "labels": {POOL_LABEL: dns_label(pool)},
            },
            "spec": {
                "driver": DRIVER,
                "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
                "allNodes": True,
                "devices": [_device(d) for d in sorted(group, key=lambda d: d.id)],
            },
        }
        for acceptor, group in sorted(by_acceptor.items())
    ]


def _device(device: PoolDevice) -> dict[str, Any]:
    return {
        "name": dns_label(f"{device.acceptor}-{device.id}"),
        "allowMultipleAllocations": True,
        "attributes": {
            # An attribute's string is at most 64 characters (the API's rule).
            "acceptor": {"string": device.acceptor[:64]},
            "vendor": {"string": device.vendor[:64]},
            "model": {"string": device.model[:64]},
        },
        "capacity": {"memory": {"value": f"{device.memory_mib}Mi"}},
    }
