"""containerd (config version 2): a ``radium`` runtime for the CRI plugin, in a drop-in.

The drop-in holds the runtime (``runtime_type = "io.containerd.runc.v2"``, ``runtime_path`` =
containerd-shim-radium-v2, the runc runtime's options copied, ``radium.io/*`` pod annotations
passed through); the main config only gains the drop-in in its ``imports``. ``ctr`` and nerdctl
reach the same shim as ``--runtime io.containerd.radium.v2`` through PATH.
"""

from __future__ import annotations

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


def _runc_options(main: dict[str, Any]) -> dict[str, Any]:
    """The options of the existing runc runtime (SystemdCgroup, BinaryName, ...), to copy."""
    runtimes = main.get("plugins", {}).get(CRI, {}).get("containerd", {}).get("runtimes", {})
    options = runtimes.get("runc", {}).get("options", {})
    return dict(options) if isinstance(options, dict) else {}


def dropin(options: Options, main: dict[str, Any]) -> bytes:
    """containerd's drop-in config naming the ``radium`` runtime."""
    doc = tomlkit.document()
    doc.add(
        tomlkit.comment(
            "Written by `radium setup containerd`; `radium setup containerd --remove` deletes it."
        )
    )
    doc.add("version", 2)
    plugins = tomlkit.table(is_super_table=True)
    cri = tomlkit.table(is_super_table=True)
    containerd = tomlkit.table(is_super_table=not options.set_as_default)
    if options.set_as_default:
        containerd.add("default_runtime_name", RUNTIME_NAME)
    runtimes = tomlkit.table(is_super_table=True)
    runtime = tomlkit.table()
    runtime.add("runtime_type", "io.containerd.runc.v2")
    runtime.add("runtime_path", options.programs["containerd-shim-radium-v2"])
    runtime.add("pod_annotations", [f"{ANNOTATION_PREFIX}*"])
    runc_options = _runc_options(main)
    if runc_options:
        runtime.add("options", runc_options)
    runtimes.add(RUNTIME_NAME, runtime)
    containerd.add("runtimes", runtimes)
    cri.add("containerd", containerd)
    plugins.add(CRI, cri)
    doc.add("plugins", plugins)
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
