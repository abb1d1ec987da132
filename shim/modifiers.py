"""Spec modifiers: small edits of a raw config.json dict, one concept each.

Each modifier is a no-op when it does not apply and is idempotent, so the wrapper, the containerd
shim and a re-run can all apply the same list. Edits touch the dict in place and leave every key
they do not own alone, so fields newer than this code survive.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence

from radium import config as config_module
from radium.config import Config
from radium.shim import request as request_module

Spec = dict[str, Any]
Modifier = Callable[[Spec], None]

HOOK_TIMEOUT_SECONDS = 30
#: The only environment the hook gets: never the container's, never the engine's LD_*/PYTHON*.
HOOK_PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_FORWARDED_ENV = (config_module.ENV_VAR, "RADIUM_DEBUG")


def hook_command(config: Config) -> tuple[str, ...]:
    """The hook argv prefix: configured, else this installation's radium-hook, isolated (-I)."""
    if config.runtime.hook_command:
        return config.runtime.hook_command
    import sysconfig

    return (sys.executable, "-I", os.path.join(sysconfig.get_path("scripts"), "radium-hook"))


def hook_env(environ: Mapping[str, str]) -> list[str]:
    """A scrubbed hook environment: PATH plus Radium's own settings from the wrapper's side."""
    env = [HOOK_PATH_ENV]
    for name in _FORWARDED_ENV:
        value = environ.get(name)
        if value:
            if name == config_module.ENV_VAR:
                value = os.path.abspath(value)
            env.append(f"{name}={value}")
    return env


def _is_radium_hook(hook: Any, command: Sequence[str]) -> bool:
    return (
        isinstance(hook, dict)
        and hook.get("path") == command[0]
        and hook.get("args", [])[: len(command)] == list(command)
    )


@dataclass(frozen=True)
class AddHooks:
    """Add radium-hook as a prestart and a poststop hook (once)."""

    command: Sequence[str]
    env: Sequence[str]
    #: Seconds the engine lets the hook run (the prestart one may wait for capacity).
    timeout: int = HOOK_TIMEOUT_SECONDS

    def __call__(self, spec: Spec) -> None:
        hooks = spec.setdefault("hooks", {})
        for stage in ("prestart", "poststop"):
            entries = hooks.setdefault(stage, [])
            if any(_is_radium_hook(entry, self.command) for entry in entries):
                continue
            entries.append(
                {
                    "path": self.command[0],
                    "args": [*self.command, stage],
                    "env": list(self.env),
                    "timeout": self.timeout,
                }
            )


@dataclass(frozen=True)
class AddAnnotations:
    """Record the container's Radium request as ``radium.io/`` annotations."""

    annotations: Mapping[str, str]

    def __call__(self, spec: Spec) -> None:
        spec.setdefault("annotations", {}).update(self.annotations)


def for_request(
    request: Mapping[str, str], config: Config, environ: Mapping[str, str]
) -> list[Modifier]:
    """The modifiers for a container that asked for Radium with ``request``."""
    timeout = HOOK_TIMEOUT_SECONDS + math.ceil(request_module.wait_seconds(request))
    return [AddAnnotations(request), AddHooks(hook_command(config), hook_env(environ), timeout)]


def for_spec(
    spec: Mapping[str, Any], config: Config, environ: Mapping[str, str] = os.environ
) -> Optional[list[Modifier]]:
    """The modifiers for this container, or None when it asks nothing of Radium."""
    request = request_module.from_spec(spec)
    return None if request is None else for_request(request, config, environ)


def apply(spec: Spec, modifiers: Sequence[Modifier]) -> Spec:
    for modifier in modifiers:
        modifier(spec)
    return spec
