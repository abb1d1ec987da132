"""The CDI spec of a prepared claim: one device, ``radium.io/claim=<claim uid>``.

One file per claim in the CDI spec directory, written whole (a runtime may be reading the
directory) and removed when the claim is unprepared. kubelet hands the device's id to the
container's start in a CDI annotation, from which radium-runtime attaches the container to the
claim's lease (:mod:`radium.shim.pods`); a runtime that applies CDI itself (containerd 1.7+,
CRI-O) also sets the device's one edit, ``RADIUM_CLAIM``, which names the claim to the program.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from typing import Any

from radium.dra.paths import DRIVER
from radium.errors import SpecError

__all__ = ["CDI_VERSION", "KIND", "check_uid", "device_id", "path", "remove", "spec", "write"]

CDI_VERSION = "0.5.0"
KIND = f"{DRIVER}/claim"
#: A claim uid Radium takes (Kubernetes' are UUIDs): a CDI device name, an agent key and a file
#: name without any further check (radium.shim.pods reads it back with the same rule).
_UID = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9-]{0,127}$")


def check_uid(uid: str) -> str:
    """``uid``, or a SpecError when it is not one Radium takes."""
    if not _UID.match(uid):
        raise SpecError(f"claim uid {uid!r} is not a Kubernetes uid")
    return uid


def device_id(uid: str) -> str:
    """The fully qualified CDI device id kubelet hands the runtime."""
    return f"{KIND}={uid}"


def spec(uid: str) -> dict[str, Any]:
    """The claim's CDI spec."""
    check_uid(uid)
    return {
        "cdiVersion": CDI_VERSION,
        "kind": KIND,
        "devices": [{"name": uid, "containerEdits": {"env": [f"RADIUM_CLAIM={uid}"]}}],
    }


def path(cdi_dir: str, uid: str) -> str:
    return os.path.join(cdi_dir, f"{DRIVER}-claim-{uid}.json")


def write(cdi_dir: str, uid: str) -> str:
    """Write the claim's spec (idempotent); its path."""
    content = json.dumps(spec(uid), indent=2) + "\n"
    os.makedirs(cdi_dir, mode=0o755, exist_ok=True)
    target = path(cdi_dir, uid)
    tmp = f"{target}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(content)
    os.replace(tmp, target)
    return target


def remove(cdi_dir: str, uid: str) -> None:
    """Remove the claim's spec (idempotent)."""
    if _UID.match(uid):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path(cdi_dir, uid))
