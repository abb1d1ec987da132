"""podman (and CRI-O without a wrapper): OCI hooks.d files that run radium-hook.

One file per stage, because a hooks.d entry passes the same arguments at every stage it lists.
They fire only for containers with a ``radium.io/...`` annotation (``podman run --annotation
radium.io/gpus=1``); no wrapper ran, so the hook reads the request from the annotations.
"""

from __future__ import annotations

import json
from pathlib import Path

from radium.engines.base import Options, Owned, Plan

__all__ = ["DEFAULT_HOOKS_DIR", "HOOK_PATH_ENV", "STAGES", "hook_file", "plan"]

DEFAULT_HOOKS_DIR = Path("/usr/share/containers/oci/hooks.d")
STAGES = ("prestart", "poststop")
HOOK_PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def hook_file(options: Options, stage: str) -> bytes:
    """podman's OCI hook file for one stage (prestart or poststop)."""
    python, hook = options.programs["python"], options.programs["radium-hook"]
    env = [HOOK_PATH_ENV] + (
        [f"RADIUM_CONFIG={options.config_file}"] if options.config_file else []
    )
    document = {
        "version": "1.0.0",
        "hook": {"path": python, "args": [python, "-I", hook, stage], "env": env, "timeout": 30},
        "when": {"annotations": {"^radium\\.io/": ".*"}},
        "stages": [stage],
    }
    return (json.dumps(document, indent=2) + "\n").encode()


def plan(options: Options, hooks_dir: Path = DEFAULT_HOOKS_DIR) -> Plan:
    """Setting podman up: its two hook files."""
    return Plan(
        files=tuple(
            Owned(hooks_dir / f"radium-{stage}.json", hook_file(options, stage)) for stage in STAGES
        ),
        restart_unit="",
        restart_hint="nothing to restart: podman and CRI-O read hooks.d when a container starts",
    )
