"""The OCI state a runtime gives a hook on stdin, and the little of config.json the hook needs."""

from __future__ import annotations

import os
import re

from radium.constants import ANNOTATION_PREFIX
from radium.errors import SpecError
from radium.ocispec import parse_object

# Not typing.TYPE_CHECKING: importing typing costs milliseconds on every container start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Mapping

    from typing_extensions import TypeGuard

__all__ = [
    "MAX_STATE_BYTES",
    "State",
    "parse_state",
    "rootfs_path",
    "valid_container_id",
    "without_image_annotations",
]

MAX_STATE_BYTES = 1 << 20
# runc's own rule for container ids; anything else could be a path trick.
_CONTAINER_ID = re.compile(r"^[\w+\-.]{1,1024}$")


class State:
    """The fields of the OCI state that the hook uses (a plain class: no dataclasses import)."""

    __slots__ = ("annotations", "bundle", "container_id", "pid", "root")

    def __init__(
        self,
        container_id: str,
        pid: int,
        bundle: str,
        annotations: Mapping[str, str],
        root: str = "",
    ) -> None:
        self.container_id = container_id
        self.pid = pid
        self.bundle = bundle
        self.annotations = annotations
        #: crun's extra field: the rootfs it actually uses.
        self.root = root

    @property
    def radium_annotations(self) -> dict[str, str]:
        return {k: v for k, v in self.annotations.items() if k.startswith(ANNOTATION_PREFIX)}

    @property
    def wants_radium(self) -> bool:
        from radium.shim.pods import is_pod_sandbox, selected

        annotations = self.annotations
        return (
            bool(self.radium_annotations)
            and not is_pod_sandbox(annotations)
            and selected(annotations)
        )


def valid_container_id(container_id: object) -> TypeGuard[str]:
    """runc's rule for container ids: nothing that could be a path trick."""
    return (
        isinstance(container_id, str)
        and bool(_CONTAINER_ID.match(container_id))
        and container_id not in (".", "..")
    )


def parse_state(raw: bytes) -> State:
    """Parse and validate the state JSON."""
    if len(raw) > MAX_STATE_BYTES:
        raise SpecError("OCI state on stdin is larger than 1 MiB")
    data = parse_object(raw, "OCI state on stdin")
    container_id = data.get("id")
    if not valid_container_id(container_id):
        raise SpecError(f"OCI state has an invalid container id {container_id!r}")
    bundle = data.get("bundle")
    if not isinstance(bundle, str) or not bundle.startswith("/"):
        raise SpecError("OCI state has no absolute 'bundle' path")
    pid = data.get("pid", 0)
    if not isinstance(pid, int) or isinstance(pid, bool) or pid < 0:
        raise SpecError(f"OCI state has an invalid pid {pid!r}")
    annotations = data.get("annotations") or {}
    if not isinstance(annotations, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in annotations.items()
    ):
        raise SpecError("OCI state 'annotations' must map strings to strings")
    root = data.get("root", "")
    return State(
        container_id=container_id,
        pid=pid,
        bundle=bundle,
        annotations=annotations,
        root=root if isinstance(root, str) else "",
    )


def rootfs_path(state: State, spec: Mapping[str, Any]) -> str:
    """The rootfs directory: crun's ``root``, else ``root.path`` resolved against the bundle."""
    if state.root:
        return state.root
    root = spec.get("root")
    path = root.get("path") if isinstance(root, dict) else None
    if not isinstance(path, str) or not path:
        raise SpecError(f"{state.bundle}/config.json has no root.path")
    return os.path.join(state.bundle, path)


def without_image_annotations(state: State, notes: list[str]) -> State:
    """``state`` less the ``radium.io/`` annotations its image set (podman merges an image's
    manifest annotations into the container's: only the user's may ask).

    Checked against podman's record (containers/storage, found from the bundle path). Where
    there is none the annotations are the wrapper's own (docker, containerd, runc: it already
    dropped the image's) or an engine's that does not merge the image's (CRI-O: the pod's).
    """
    from radium.shim import image_record

    try:
        image = image_record.podman(state.bundle, state.container_id)
    except image_record.RecordError as exc:
        notes.append(f"annotations not checked against the image: {exc}")
        return state
    if image is None:
        return state
    kept = {}
    for name, value in state.annotations.items():
        if name.startswith(ANNOTATION_PREFIX) and image.annotations.get(name) == value:
            notes.append(f"{name}={value} is the image's annotation (or equal to it): ignored")
        else:
            kept[name] = value
    return State(state.container_id, state.pid, state.bundle, kept, state.root)
