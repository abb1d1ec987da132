"""containerd (config version 2): a ``radium`` runtime for the CRI plugin, in a drop-in.

The drop-in holds the main config's CRI section (containerd replaces a plugin's section with an
imported one) plus the runtime: ``runtime_type = "io.containerd.runc.v2"``, the runc runtime's
options copied with ``BinaryName`` = radium-runtime, ``radium.io/*`` pod annotations and
``cdi.k8s.io/*`` container annotations (a DRA claim's CDI devices) passed through. The main
config only gains the drop-in in its ``imports``. ``ctr`` and nerdctl reach
containerd-shim-radium-v2 as ``--runtime io.containerd.radium.v2`` through PATH.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Optional

import tomlkit

from radium import tomlcache
from radium.constants import ANNOTATION_PREFIX
from radium.engines.base import Edit, Options, Owned, Plan
from radium.errors import ConfigError

__all__ = ["CRI", "DEFAULT_CONFIG", "DEFAULT_DROPIN", "RUNTIME_NAME", "dropin", "plan"]

DEFAULT_CONFIG = Path("/etc/containerd/config.toml")
DEFAULT_DROPIN = Path("/etc/containerd/conf.d/radium.toml")
CRI = "io.containerd.grpc.v1.cri"
RUNTIME_NAME = "radium"


def _parse(content: Optional[bytes], path: Path) -> dict[str, Any]:
    if content is None:
        return {}
    try:
        return tomlcache.parse(content, str(path))
    except ConfigError as exc:
        raise ConfigError(exc.message, hint="fix it, then run radium setup again") from exc


def _cri_section(main: dict[str, Any]) -> dict[str, Any]:
    """A copy of the main config's CRI plugin section (empty when it has none)."""
    section = main.get("plugins", {}).get(CRI, {})
    return copy.deepcopy(section) if isinstance(section, dict) else {}


def _table(parent: dict[str, Any], key: str) -> dict[str, Any]:
    """``parent[key]``, made a table (an empty one when absent or not a table)."""
    value = parent.get(key)
    if not isinstance(value, dict):
        value = parent[key] = {}
    return value


def dropin(options: Options, main: dict[str, Any]) -> bytes:
    """containerd's drop-in config: the main config's CRI section plus the ``radium`` runtime.

    containerd 1.6 replaces a plugin's whole section with an imported file's, so a
    drop-in holding only our runtime would drop the node's own CRI settings (its runc runtime's
    ``SystemdCgroup``, ``sandbox_image``, registries, CNI): the drop-in repeats them.
    """
    cri = _cri_section(main)
    containerd = _table(cri, "containerd")
    if options.set_as_default:
        containerd["default_runtime_name"] = RUNTIME_NAME
    runtimes = _table(containerd, "runtimes")
    runc = runtimes.get("runc", {})
    runc_options = runc.get("options", {}) if isinstance(runc, dict) else {}
    # The stock runc shim with radium-runtime as its runc: containerd 1.6 ignores a CRI
    # runtime's runtime_path, and a runtime_type of our own would make the CRI hand the shim
    # generic options in place of runc's (SystemdCgroup, Root), which the runc shim refuses.
    runtime: dict[str, Any] = {
        "runtime_type": "io.containerd.runc.v2",
        "pod_annotations": [f"{ANNOTATION_PREFIX}*"],
        # kubelet's CDI devices of a container's DRA claims (radium dra serve's specs)
        "container_annotations": ["cdi.k8s.io/*"],
        "options": {
            **(runc_options if isinstance(runc_options, dict) else {}),
            "BinaryName": options.programs["radium-runtime"],
        },
    }
    runtimes[RUNTIME_NAME] = runtime
    doc = tomlkit.document()
    doc.add(
        tomlkit.comment(
            "Written by `radium setup containerd`; `radium setup containerd --remove` deletes it."
        )
    )
    doc.add(tomlkit.comment("It repeats the main config's CRI section (an import replaces that"))
    doc.add(
        tomlkit.comment("whole section): after editing it, run `radium setup containerd` again.")
    )
    doc.add("version", 2)
    doc.add("plugins", {CRI: cri})
    return tomlkit.dumps(doc).encode()


def plan(
    options: Options, config: Path = DEFAULT_CONFIG, dropin_path: Path = DEFAULT_DROPIN
) -> Plan:
    """Setting containerd up: its drop-in, and the import of it in its main config."""
    current = config.read_bytes() if config.exists() else None
    main = _parse(current, config)
    if current is not None and main.get("version") != 2:
        raise ConfigError(
            f"{config} is not a version 2 containerd config "
            f"(version = {main.get('version', 'unset, meaning 1')})",
            hint="migrate it to version 2 (containerd config default), then run radium setup again",
        )
    entry = str(dropin_path)

    def install(content: Optional[bytes]) -> bytes:
        if content is None:
            return f'version = 2\nimports = ["{entry}"]\n'.encode()
        _parse(content, config)
        doc = tomlkit.parse(content.decode("utf-8"))
        imports = doc.get("imports")
        if imports is None:
            doc["imports"] = [entry]
        elif entry not in imports:
            imports.append(entry)
        return tomlkit.dumps(doc).encode()

    def uninstall(content: bytes) -> Optional[bytes]:
        doc = tomlkit.parse(content.decode("utf-8"))
        imports = doc.get("imports")
        if imports is not None and entry in imports:
            imports.remove(entry)
            if not imports:
                del doc["imports"]
        return tomlkit.dumps(doc).encode()

    return Plan(
        files=(Owned(dropin_path, dropin(options, main)), Edit(config, install, uninstall)),
        restart_unit="containerd",
        restart_hint="restart containerd (systemctl restart containerd) for the runtime to appear",
    )
