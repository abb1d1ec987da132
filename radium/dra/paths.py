"""Where kubelet and the container runtime look for what the DRA plugin makes (no imports
beyond the standard library's lightest: the ``radium`` command line reads the defaults)."""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["DRIVER", "Paths"]

#: The DRA driver name: in DeviceClasses, ResourceSlices, CDI ids and kubelet's paths.
DRIVER = "radium.io"


@dataclass(frozen=True)
class Paths:
    """Where kubelet and the container runtime look for what the plugin makes."""

    plugin_dir: str = f"/var/lib/kubelet/plugins/{DRIVER}"
    registry_dir: str = "/var/lib/kubelet/plugins_registry"
    cdi_dir: str = "/var/run/cdi"

    @property
    def endpoint(self) -> str:
        return os.path.join(self.plugin_dir, "dra.sock")

    @property
    def registration(self) -> str:
        return os.path.join(self.registry_dir, f"{DRIVER}-reg.sock")
