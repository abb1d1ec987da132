"""``radium setup ENGINE``: pick the writer, find the installed programs, apply, report."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Optional, TextIO

from radium.constants import ENGINES
from radium.engines import apply, base, containerd, crio, docker, podman
from radium.errors import ServiceError, UsageError

__all__ = ["PROGRAMS", "installed_programs", "make_plan", "options", "restart", "run"]

#: What engines run (the runtime and the shim are shell fronts: docs/runtime-front.md) and the
#: Python programs the fronts exec, and the node agent's thin client they and its hooks run.
PROGRAMS = (
    "radium-runtime",
    "radium-hook",
    "containerd-shim-radium-v2",
    "radium-runtime-full",
    "containerd-shim-radium-v2-full",
    "radium-agent-call",
)


def installed_programs() -> dict[str, str]:
    """This installation's Radium programs, as absolute paths."""
    scripts = sysconfig.get_path("scripts")
    programs = {name: os.path.join(scripts, name) for name in PROGRAMS}
    programs["python"] = sys.executable
    return programs


def options(programs: dict[str, str], set_as_default: bool = False) -> base.Options:
    """What the writers need: the programs, and the config file hooks must be pointed at."""
    config_file = os.environ.get("RADIUM_CONFIG")
    return base.Options(
        set_as_default=set_as_default,
        programs=programs,
        config_file=os.path.abspath(config_file) if config_file else "",
    )


def make_plan(
    engine: str, options: base.Options, path: Optional[Path], dropin: Optional[Path]
) -> base.Plan:
    """The plan that sets ``engine`` up (``path``, ``dropin``: where its files are)."""
    if engine == "docker":
        return docker.plan(options, path or docker.DEFAULT_CONFIG)
    if engine == "containerd":
        return containerd.plan(
            options, path or containerd.DEFAULT_CONFIG, dropin or containerd.DEFAULT_DROPIN
        )
    if engine == "crio":
        return crio.plan(options, dropin or path or crio.DEFAULT_DROPIN)
    if engine == "podman":
        return podman.plan(options, path or podman.DEFAULT_HOOKS_DIR)
    raise UsageError(f"unknown engine {engine!r}", hint=f"use one of {', '.join(ENGINES)}")


def restart(unit: str) -> None:
    """Restart a systemd unit, or say in one line why not."""
    if not Path("/run/systemd/system").is_dir() or shutil.which("systemctl") is None:
        raise ServiceError(
            f"cannot restart {unit}: this machine does not run systemd",
            hint=f"restart {unit} yourself",
        )
    result = subprocess.run(
        ["systemctl", "restart", unit], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise ServiceError(f"systemctl restart {unit} failed: {result.stderr.strip()}")


def run(
    engine: str,
    *,
    remove: bool = False,
    dry_run: bool = False,
    set_as_default: bool = False,
    path: Optional[Path] = None,
    dropin: Optional[Path] = None,
    restart_daemon: bool = False,
    out: TextIO = sys.stdout,
) -> int:
    """``radium setup ENGINE``: apply (or remove) its plan and say what changed; the exit code."""
    plan = make_plan(engine, options(installed_programs(), set_as_default), path, dropin)
    outcomes = (
        apply.remove(plan, dry_run=dry_run) if remove else apply.install(plan, dry_run=dry_run)
    )
    for outcome in outcomes:
        if dry_run:
            out.write(f"# {outcome.path}: {outcome.action}\n")
            out.write(outcome.content.decode() if outcome.content is not None else "# (no file)\n")
        else:
            out.write(f"{outcome.path}: {outcome.action}\n")
    if not (dry_run or remove):
        from radium.agent import nativeclient

        out.write(nativeclient.ensure(Path(sysconfig.get_path("scripts"))) + "\n")
    changed = any(o.action not in ("unchanged", "absent") for o in outcomes)
    if dry_run or not changed:
        return 0
    if restart_daemon and plan.restart_unit:
        restart(plan.restart_unit)
        out.write(f"restarted {plan.restart_unit}\n")
    else:
        out.write(f"{plan.restart_hint}\n")
    return 0
