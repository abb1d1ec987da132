"""Which containers of a Kubernetes pod ask Radium for anything, and for which claim.

Pod annotations reach every container of a pod, its sandbox (pause) included: the sandbox never
asks, and ``radium.io/containers`` narrows the rest. A container uses a DRA claim's lease only
when kubelet's CDI annotations give it the claim's ``radium.io/claim`` device.
"""

from __future__ import annotations

from radium.constants import ANNOTATION_PREFIX
from radium.errors import SpecError

# Not typing.TYPE_CHECKING: importing typing costs milliseconds on every container start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping, Optional

__all__ = ["CLAIM", "CONTAINERS", "SANDBOX_ANNOTATION", "claim_of", "is_pod_sandbox", "selected"]

#: A pod annotation naming the pod's containers that ask (comma-separated): pod annotations
#: reach every container of a pod, and a sidecar should not take a GPU.
CONTAINERS = ANNOTATION_PREFIX + "containers"
#: Where CRI runtimes write a container's name into its spec: containerd, CRI-O.
_CONTAINER_NAMES = ("io.kubernetes.cri.container-name", "io.kubernetes.container.name")
#: How they mark a pod's sandbox (pause) container, which gets the pod's annotations too.
SANDBOX_ANNOTATION = "io.kubernetes.cri.container-type"
_SANDBOX_TYPES = (SANDBOX_ANNOTATION, "io.kubernetes.cri-o.ContainerType")


#: The request field naming the DRA claim whose lease a container uses (docs/kubernetes.md).
CLAIM = ANNOTATION_PREFIX + "claim"
#: kubelet passes a container's CDI devices as annotations ``cdi.k8s.io/<driver>_<claim uid>``
#: = comma-separated device ids, for runtimes that take them from no other field.
_CDI_ANNOTATIONS = "cdi.k8s.io/"
_CLAIM_DEVICE = ANNOTATION_PREFIX + "claim="
_CLAIM_UID = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")


def claim_of(annotations: Mapping[str, object]) -> Optional[str]:
    """The uid of the claim of the container's ``radium.io/claim`` CDI device, from kubelet's
    CDI annotations; None without one. A ``radium.io/claim`` annotation must name that very
    claim: only kubelet says which claims a container may use (a SpecError otherwise)."""
    uids = {
        device.strip()[len(_CLAIM_DEVICE) :]
        for key, value in annotations.items()
        if isinstance(key, str) and key.startswith(_CDI_ANNOTATIONS) and isinstance(value, str)
        for device in value.split(",")
        if device.strip().startswith(_CLAIM_DEVICE)
    }
    if len(uids) > 1:
        raise SpecError(f"the container has {len(uids)} radium.io claims; it may use one")
    uid = uids.pop() if uids else None
    if uid is not None and not (uid and set(uid) <= _CLAIM_UID):
        raise SpecError(f"the container's radium.io CDI device names a bad claim uid {uid!r}")
    asked = annotations.get(CLAIM)
    if asked is not None and asked != uid:
        raise SpecError(
            f"{CLAIM}={asked} is not the container's claim: a pod uses a claim through "
            "Kubernetes (spec.resourceClaims), never by naming it"
        )
    return uid


def is_pod_sandbox(annotations: Mapping[str, object]) -> bool:
    """Whether the spec with these annotations is a pod's sandbox (pause) container."""
    return any(annotations.get(key) == "sandbox" for key in _SANDBOX_TYPES)


def selected(annotations: Mapping[str, object]) -> bool:
    """False for a container that the pod's ``radium.io/containers`` leaves out; that annotation
    has no say outside a CRI pod (no container name to match). Sandboxes: :func:`is_pod_sandbox`.
    """
    names = annotations.get(CONTAINERS)
    if not isinstance(names, str):
        return True
    for key in _CONTAINER_NAMES:
        name = annotations.get(key)
        if isinstance(name, str):
            return name in {part.strip() for part in names.split(",")}
    return True
