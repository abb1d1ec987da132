"""What a ResourceClaim asks of Radium, read from the Kubernetes API server.

kubelet's ``NodePrepareResources`` names a claim (namespace, name, uid) and nothing more; the
allocation the scheduler made is in the claim's ``status.allocation``. Of it Radium takes the
results of its own driver (one per allocated device) and the opaque configuration addressed to
it, ``{"fraction": 0.5}`` or ``{"memory": 8192}`` (MiB) for a share of one device, and turns
them into the lease request the node agent understands (``radium.io/*`` annotations).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from radium.constants import ANNOTATION_PREFIX
from radium.dra.apiserver import ApiServer, quoted
from radium.dra.capacity import consumed_memory_mib
from radium.dra.paths import DRIVER
from radium.errors import SpecError

__all__ = [
    "Allocation",
    "ApiClaims",
    "Claim",
    "ClaimSource",
    "Result",
    "allocation",
]


@dataclass(frozen=True)
class Claim:
    """A claim as kubelet names it."""

    namespace: str
    name: str
    uid: str


@dataclass(frozen=True)
class Result:
    """One device the scheduler allocated to the claim from Radium's ResourceSlices."""

    request: str
    pool: str
    device: str


@dataclass(frozen=True)
class Allocation:
    """The claim's Radium devices and the lease request they make."""

    results: tuple[Result, ...]
    request: dict[str, str]


class ClaimSource(Protocol):
    """Where claims are read: the API server, or a test's stand-in."""

    def read(self, claim: Claim) -> dict[str, Any]: ...


class ApiClaims:
    """Claims read from the API server."""

    def __init__(self, api: ApiServer) -> None:
        self.api = api

    def read(self, claim: Claim) -> dict[str, Any]:
        path = "/apis/resource.k8s.io/v1/namespaces/{}/resourceclaims/{}".format(
            *map(quoted, (claim.namespace, claim.name))
        )
        return self.api.call("GET", path, f"claim {claim.namespace}/{claim.name}")


def _items(value: object) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _share(parameters: dict[str, Any], what: str) -> dict[str, str]:
    """The lease request of one opaque configuration addressed to Radium."""
    unknown = sorted(set(parameters) - {"apiVersion", "kind", "fraction", "memory"})
    if unknown:
        raise SpecError(f"{what}: unknown parameter {unknown[0]!r} (known: fraction, memory)")
    request: dict[str, str] = {}
    fraction = parameters.get("fraction")
    if fraction is not None:
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)):
            raise SpecError(f"{what}: fraction must be a number in (0, 1], got {fraction!r}")
        if not 0 < fraction <= 1:
            raise SpecError(f"{what}: fraction must be in (0, 1], got {fraction}")
        request[ANNOTATION_PREFIX + "fraction"] = repr(float(fraction))
    memory = parameters.get("memory")
    if memory is not None:
        if isinstance(memory, bool) or not isinstance(memory, int) or memory <= 0:
            raise SpecError(f"{what}: memory must be a positive number of MiB, got {memory!r}")
        request[ANNOTATION_PREFIX + "memory"] = str(memory)
    return request


def allocation(resource_claim: dict[str, Any], claim: Claim) -> Allocation:
    """The claim's Radium devices and lease request; a ``SpecError`` naming the claim when it
    is not the one kubelet named, not allocated, or asks what Radium cannot give."""
    what = f"claim {claim.namespace}/{claim.name}"
    metadata = resource_claim.get("metadata")
    uid = metadata.get("uid") if isinstance(metadata, dict) else None
    if uid != claim.uid:
        raise SpecError(f"{what} has uid {uid!r}, not {claim.uid!r}: it was replaced")
    status = resource_claim.get("status")
    allocated = status.get("allocation") if isinstance(status, dict) else None
    devices = allocated.get("devices") if isinstance(allocated, dict) else None
    if not isinstance(devices, dict):
        raise SpecError(f"{what} is not allocated")
    ours = [r for r in _items(devices.get("results")) if r.get("driver") == DRIVER]
    results = tuple(
        Result(str(r.get("request", "")), str(r.get("pool", "")), str(r.get("device", "")))
        for r in ours
    )
    if not results:
        raise SpecError(f"{what} has no {DRIVER} device allocated")
    shares = [
        _share(config["opaque"].get("parameters") or {}, what)
        for config in _items(devices.get("config"))
        if isinstance(config.get("opaque"), dict) and config["opaque"].get("driver") == DRIVER
    ]
    consumed = [
        {ANNOTATION_PREFIX + "memory": str(mib)}
        for r in ours
        if (mib := consumed_memory_mib(resource_claim, r, what)) is not None
    ]
    if shares and consumed:
        raise SpecError(
            f"{what} asks its share twice, as capacity and in its config for {DRIVER}: use one"
        )
    share = {k: v for one in shares + consumed for k, v in one.items()}
    if share and len(results) > 1:
        raise SpecError(f"{what}: a fraction or memory share is of one device, not {len(results)}")
    request = share or {ANNOTATION_PREFIX + "gpus": str(len(results))}
    return Allocation(results, request)
