"""Keeping the driver's ResourceSlices in the API server what the pool has.

One round reads the slices labelled with the DRA pool (:data:`radium.dra.slices.POOL_LABEL`) and
the pool's serving devices. When they agree, nothing is written and the generation stays. When
they differ, every slice is written at the next generation (created or replaced), and then
the slices of acceptors that are gone are deleted: consumers of a pool take only its newest
generation, and wait while fewer slices than ``resourceSliceCount`` carry it, so they never
see a mix of old and new devices.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Protocol

from radium.dra.apiserver import ApiServer, quoted
from radium.dra.paths import DRIVER
from radium.dra.slices import POOL_LABEL, PoolDevice, dns_label, slices

__all__ = ["SLICES", "ApiSlices", "Published", "SliceStore", "every", "publish"]

log = logging.getLogger(__name__)

SLICES = "/apis/resource.k8s.io/v1/resourceslices"


class SliceStore(Protocol):
    """Where ResourceSlices are kept: the API server, or a test's dictionary."""

    def list(self, selector: str) -> list[dict[str, Any]]: ...
    def create(self, obj: dict[str, Any]) -> None: ...
    def replace(self, obj: dict[str, Any]) -> None: ...
    def delete(self, name: str) -> None: ...


class ApiSlices:
    """ResourceSlices in the API server (RBAC: list, create, update, delete ``resourceslices``)."""

    def __init__(self, api: ApiServer) -> None:
        self.api = api

    def list(self, selector: str) -> list[dict[str, Any]]:
        answer = self.api.call("GET", f"{SLICES}?labelSelector={quoted(selector)}", "slices")
        items = answer.get("items")
        return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []

    def create(self, obj: dict[str, Any]) -> None:
        self.api.call("POST", SLICES, f"slice {obj['metadata']['name']}", obj)

    def replace(self, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        self.api.call("PUT", f"{SLICES}/{quoted(name)}", f"slice {name}", obj)

    def delete(self, name: str) -> None:
        self.api.call("DELETE", f"{SLICES}/{quoted(name)}", f"slice {name}")


@dataclass(frozen=True)
class Published:
    """What one round did."""

    generation: int
    created: int = 0
    replaced: int = 0
    deleted: int = 0


def publish(store: SliceStore, devices: Iterable[PoolDevice], pool: str) -> Published:
    """Make the store's slices of ``pool`` those of ``devices``; what it did."""
    listed = store.list(f"{POOL_LABEL}={dns_label(pool)}")
    # Only the driver's own: a label is anyone's to set.
    existing = {_name(s): s for s in listed if s.get("spec", {}).get("driver") == DRIVER}
    devices = list(devices)
    generation = max((_generation(s) for s in existing.values()), default=0)
    if existing and _agree(existing, slices(devices, pool, generation)):
        return Published(generation)
    generation += 1
    created = replaced = 0
    for obj in slices(devices, pool, generation):
        old = existing.pop(_name(obj), None)
        if old is None:
            store.create(obj)
            created += 1
        else:
            version = old.get("metadata", {}).get("resourceVersion")
            if version:  # the API server replaces only the version it was shown
                obj["metadata"]["resourceVersion"] = version
            store.replace(obj)
            replaced += 1
    for name in existing:
        store.delete(name)
    done = Published(generation, created, replaced, len(existing))
    log.info("pool %s: generation %d (%s)", pool, generation, done)
    return done


def every(seconds: float, round_: Callable[[], Published], sleep: Callable[[float], None]) -> None:
    """Run ``round_`` every ``seconds`` for ever; a round that fails is logged, not fatal (a
    pool or API server that is down now may be back at the next)."""
    from radium.errors import RadiumError

    while True:
        try:
            round_()
        except RadiumError as exc:
            log.warning("publishing the slices: %s", exc.one_line())
        sleep(seconds)


def _name(obj: dict[str, Any]) -> str:
    return str(obj.get("metadata", {}).get("name", ""))


def _generation(obj: dict[str, Any]) -> int:
    value = obj.get("spec", {}).get("pool", {}).get("generation", 0)
    return value if isinstance(value, int) else 0


def _agree(existing: dict[str, dict[str, Any]], desired: list[dict[str, Any]]) -> bool:
    """Whether the stored slices are ``desired`` in every field Radium sets (the API server
    may add defaults of its own)."""
    if sorted(existing) != sorted(_name(d) for d in desired):
        return False
    for want in desired:
        have = existing[_name(want)].get("spec", {})
        if any(have.get(key) != value for key, value in want["spec"].items()):
            return False
    return True
