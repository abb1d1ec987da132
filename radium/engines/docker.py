"""docker: ``runtimes.radium.path`` in daemon.json, every other key kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from radium.engines.base import Edit, Options, Plan
from radium.errors import ConfigError

__all__ = ["DEFAULT_CONFIG", "RUNTIME_NAME", "plan"]

DEFAULT_CONFIG = Path("/etc/docker/daemon.json")
RUNTIME_NAME = "radium"


def _load(content: Optional[bytes], path: Path) -> dict[str, Any]:
    if content is None or not content.strip():
        return {}
    try:
        data = json.loads(content)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"{path} is not valid JSON: {exc}", hint="fix it, then run radium setup again"
        ) from exc
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path} is not a JSON object", hint="fix it, then run radium setup again"
        )
    return data


def _dump(data: dict[str, Any]) -> bytes:
    return (json.dumps(data, indent=4) + "\n").encode()


def plan(options: Options, config: Path = DEFAULT_CONFIG) -> Plan:
    """Setting docker up: the ``radium`` runtime in its daemon.json."""
    runtime = options.programs["radium-runtime"]

    def install(content: Optional[bytes]) -> bytes:
        data = _load(content, config)
        runtimes = data.setdefault("runtimes", {})
        if not isinstance(runtimes, dict):
            raise ConfigError(f"{config}: 'runtimes' is not an object", hint="fix it first")
        runtimes[RUNTIME_NAME] = {"path": runtime}
        if options.set_as_default:
            data["default-runtime"] = RUNTIME_NAME
        return _dump(data)

    def uninstall(content: bytes) -> Optional[bytes]:
        data = _load(content, config)
        runtimes = data.get("runtimes")
        if isinstance(runtimes, dict):
            runtimes.pop(RUNTIME_NAME, None)
            if not runtimes:
                del data["runtimes"]
        if data.get("default-runtime") == RUNTIME_NAME:
            del data["default-runtime"]
        return _dump(data)

    return Plan(
        files=(Edit(config, install, uninstall),),
        restart_unit="docker",
        restart_hint="restart dockerd (systemctl restart docker) for the runtime to appear",
    )
