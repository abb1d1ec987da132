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
from radium.configtree import Config
from radium.constants import ANNOTATION_PREFIX
from radium.shim import request as request_module

__all__ = [
    "HOOK_PATH_ENV",
    "HOOK_TIMEOUT_SECONDS",
    "AddAnnotations",
    "AddHooks",
    "Modifier",
    "Spec",
    "apply",
    "for_request",
    "for_spec",
    "hook_command",
    "hook_env",
]

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


def _runs(hook: Any, command: Sequence[str]) -> bool:
    """Whether the hook entry runs ``command``, itself or as its fallback (after ``--``)."""
    if not isinstance(hook, dict) or not command:
        return False
    args = hook.get("args", [])
    if not isinstance(args, list):
        return False
    if hook.get("path") == command[0] and args[: len(command)] == list(command):
        return True
    after = args.index("--") + 1 if "--" in args else len(args)
    return args[after : after + len(command)] == list(command)


@dataclass(frozen=True)
class AddHooks:
    """Add radium-hook as a prestart and a poststop hook (once)."""

    command: Sequence[str]
    env: Sequence[str]
    #: Seconds the engine lets the hook run (the prestart one may wait for capacity).
    timeout: int = HOOK_TIMEOUT_SECONDS
    #: The hook ``command`` runs when it cannot do the work itself (the agent's thin hook
    #: falls back to the full one), given after ``--`` with the stage.
    fallback: Sequence[str] = ()

    def __call__(self, spec: Spec) -> None:
        hooks = spec.setdefault("hooks", {})
        for stage in ("prestart", "poststop"):
            entries = hooks.setdefault(stage, [])
            # Either kind already there (a spec edited before by the agent, or by the full
            # wrapper): the container gets one Radium hook per stage, never two.
            if any(_runs(entry, self.command) for entry in entries):
                continue
            if self.fallback and any(_runs(entry, self.fallback) for entry in entries):
                continue
            entries.append(
                {
                    "path": self.command[0],
                    "args": [*self.command, stage, *self._fallback(stage)],
                    "env": list(self.env),
                    "timeout": self.timeout,
                }
            )

    def _fallback(self, stage: str) -> list[str]:
        return ["--", *self.fallback, stage] if self.fallback else []


@dataclass(frozen=True)
class AddAnnotations:
    """Record the container's Radium request as ``radium.io/`` annotations, and only it: a
    ``radium.io/`` annotation the request left out (the image's, merged by podman) is removed,
    so a hook that reads the OCI state (the agent's) sees what the user asked and nothing more.
    """

    annotations: Mapping[str, str]

    def __call__(self, spec: Spec) -> None:
        existing = spec.setdefault("annotations", {})
        for name in [k for k in existing if k.startswith(ANNOTATION_PREFIX)]:
            if name not in self.annotations:
                del existing[name]
        existing.update(self.annotations)


def for_request(
    request: Mapping[str, str],
    config: Config,
    environ: Mapping[str, str],
    agent_hook: Sequence[str] = (),
) -> list[Modifier]:
    """The modifiers for a container that asked for Radium with ``request``.

    With ``agent_hook`` (the node agent's thin hook command) the hooks are that, falling back
    to radium-hook when the agent cannot be reached; otherwise they are radium-hook.
    """
    timeout = HOOK_TIMEOUT_SECONDS + math.ceil(request_module.wait_seconds(request))
    env = hook_env(environ)
    if agent_hook:
        hooks = AddHooks(agent_hook, env, timeout, fallback=hook_command(config))
    else:
        hooks = AddHooks(hook_command(config), env, timeout)
    return [AddAnnotations(request), hooks]


def for_spec(
    spec: Mapping[str, Any],
    config: Config,
    environ: Mapping[str, str] = os.environ,
    image: Optional[request_module.ImageSet] = request_module.NOTHING_SET,
) -> Optional[list[Modifier]]:
    """The modifiers for this container, or None when it asks nothing of Radium (``image``:
    what its image set, see :func:`request.from_spec`; by default nothing)."""
    request = request_module.from_spec(spec, image)
    return None if request is None else for_request(request, config, environ)


def apply(spec: Spec, modifiers: Sequence[Modifier]) -> Spec:
    """Apply each modifier to ``spec``, in order."""
    for modifier in modifiers:
        modifier(spec)
    return spec
