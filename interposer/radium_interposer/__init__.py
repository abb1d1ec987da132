"""Radium's interposer: the code that runs inside containers.

Stdlib only, Python 3.8+: the image may have nothing else. It is put on ``sys.path`` by the
``radium.pth`` file the hook mounts into the image's site directory. For now it reports where
it came from; redirecting modules to an acceptor is the data plane's job.
"""

import json
import os
from typing import Any, Dict

__all__ = ["LeasePreempted", "VersionMismatch", "bundle", "container", "report"]

#: Where the hook mounts the container's runtime directory (see hook.runtime_target).
RUNTIME_DIR = os.environ.get("RADIUM_RUNTIME_DIR", "/run/radium")


def __getattr__(name: str) -> Any:
    # The errors a program may catch; their module loads when one is first named.
    if name == "LeasePreempted":
        from radium_interposer.errors import LeasePreempted

        return LeasePreempted
    if name == "VersionMismatch":
        from radium_interposer.errors import VersionMismatch

        return VersionMismatch
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _read_json(path: str) -> Dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def bundle() -> Dict[str, Any]:
    """The manifest of the bundle this module was loaded from ({} outside a bundle)."""
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    manifest = _read_json(os.path.join(root, "manifest.json"))
    if manifest:
        manifest = {k: v for k, v in manifest.items() if k != "files"}
        manifest["path"] = root
    return manifest


def container() -> Dict[str, Any]:
    """What the hook detected about this container ({} outside a Radium container)."""
    return _read_json(os.path.join(RUNTIME_DIR, "info.json"))


def report() -> Dict[str, Any]:
    """One dict saying which bundle is loaded and what the hook found."""
    info = container()
    return {
        "bundle": bundle(),
        "platform": info.get("platform", {}),
        "request": info.get("request", {}),
        "container_id": info.get("container_id", ""),
    }
