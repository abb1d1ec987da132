"""``radium doctor``: check an installation end to end and say how to fix what is wrong.

Each check is small and independent; a failing one carries the command that fixes it. Engine
configurations are checked by asking ``radium setup``'s own writers whether they would change
anything (a dry run): configured means "setup would leave it as it is".
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from radium.configtree import Config
from radium.engines import apply, setup
from radium.errors import RadiumError

__all__ = [
    "ENGINE_PROGRAMS",
    "Check",
    "check_agent",
    "check_bundles",
    "check_engine",
    "check_pool",
    "check_programs",
    "check_runtime",
    "fail",
    "ok",
    "render",
    "run_checks",
]

#: engine -> the programs that say it is installed here
ENGINE_PROGRAMS = {
    "docker": ("dockerd",),
    "containerd": ("containerd",),
    "crio": ("crio",),
    "podman": ("podman",),
}


@dataclass(frozen=True)
class Check:
    """One line of ``radium doctor``: what was checked, ok or FAIL, and the fix."""

    name: str
    status: str  # "ok", "FAIL" or "skip"
    detail: str
    fix: str = ""


def ok(name: str, detail: str) -> Check:
    """A check that passed."""
    return Check(name, "ok", detail)


def fail(name: str, detail: str, fix: str) -> Check:
    """A check that failed, with what to do about it."""
    return Check(name, "FAIL", detail, fix)


def check_runtime(config: Config) -> Check:
    """Whether one of the configured low-level OCI runtimes is installed."""
    for candidate in config.runtime.runtimes:
        found = candidate if os.path.isabs(candidate) else shutil.which(candidate)
        if found and os.access(found, os.X_OK):
            return ok("runtime", f"{candidate} at {found}")
    return fail(
        "runtime",
        f"none of {list(config.runtime.runtimes)} is installed",
        "apt-get install runc (or set [runtime] runtimes)",
    )


def check_programs(programs: dict[str, str]) -> Check:
    """Whether Radium's own programs are installed where the engines will look."""
    for name in setup.PROGRAMS:
        path = programs[name]
        if not os.path.isfile(path):
            return fail("programs", f"{path} is missing", "reinstall Radium: pip install .")
        if not os.access(path, os.X_OK):
            return fail("programs", f"{path} is not executable", f"chmod 755 {path}")
    return ok("programs", f"radium-runtime, radium-hook, shim in {Path(path).parent}")


def check_bundles(config: Config) -> Check:
    """Whether the client bundles are built and whole."""
    from radium.packaging import bundles
    from radium.packaging.manifest import MANIFEST

    root = Path(config.bundles.dir)
    names = (
        sorted(p.name for p in root.iterdir() if (p / MANIFEST).exists()) if root.is_dir() else []
    )
    if not names:
        return fail("bundles", f"no bundles in {root}", "sudo radium bundles build")
    for name in names:
        try:
            bundles.verify(root / name)
        except RadiumError as exc:
            return fail("bundles", exc.message, "sudo radium bundles build")
    return ok("bundles", f"{', '.join(names)} in {root} match their manifests")


def check_engine(engine: str, programs: dict[str, str], path: Path | None) -> Check:
    """Whether ``engine`` is set up to run containers through Radium."""
    name = f"engine {engine}"
    if path is None and not any(shutil.which(p) for p in ENGINE_PROGRAMS[engine]):
        return Check(name, "skip", "not installed")
    try:
        plan = setup.make_plan(engine, setup.options(programs), path, None)
        outcomes = apply.install(plan, dry_run=True)
    except RadiumError as exc:
        return fail(name, exc.message, f"fix the file, then: sudo radium setup {engine}")
    stale = [str(o.path) for o in outcomes if o.action not in ("unchanged",)]
    if stale:
        where = f" --config {path}" if path and engine == "docker" else ""
        restart = " --restart" if plan.restart_unit else ""
        return fail(
            name,
            f"Radium is not (or not fully) configured in {', '.join(stale)}",
            f"sudo radium setup {engine}{where}{restart}",
        )
    return ok(name, ", ".join(str(o.path) for o in outcomes))


def check_agent(config: Config) -> Check:
    """Whether the agent answers, and which process it is (the holder of its lock): an agent
    ``radium exec`` or the hook autostarted is said to be one, so it is not mistaken for a
    service's."""
    from radium import agentclient
    from radium.agent import lockfile

    if not config.agent.enabled:
        return Check("agent", "skip", "agent.enabled is false: containers get no leases")
    try:
        agentclient.call(config.agent.socket, {"op": "ping"}, timeout=5)
    except RadiumError as exc:
        if config.agent.autostart:
            return ok("agent", f"not running; the hook starts it on demand ({exc.message})")
        return fail("agent", exc.message, "start it: radium agent (or its systemd unit)")
    pid = lockfile.holder(Path(config.agent.state_file).with_suffix(".lock"))
    how = f", pid {pid}{', autostarted' if pid and lockfile.autostarted(pid) else ''}"
    return ok("agent", f"answers at {config.agent.socket}{how if pid else ''}")


def check_pool(config: Config) -> Iterable[Check]:
    """Whether the pool answers, and whether any of its acceptors is up."""
    from radium.poolclient import PoolClient

    client = PoolClient.of(config.client)
    try:
        status = client.status()
    except RadiumError as exc:
        yield fail("pool", exc.one_line(), _pool_fix())
        return
    finally:
        client.close()
    yield ok("pool", f"answers at {config.client.pool}")
    up = [a.name for a in status.acceptors if a.up]
    if not up:
        yield fail(
            "acceptors",
            f"no acceptor is up ({len(status.acceptors)} registered)",
            f"start one: radium acceptor serve --pool {config.client.pool}",
        )
    else:
        yield ok("acceptors", f"{len(up)} up: {', '.join(up)}")


def _pool_fix() -> str:
    """When the user named no config: use a ``radium up`` that runs here with another one.
    Else (or when none runs): start the pool, or fix the config."""
    from radium import config as config_module
    from radium import up

    using, _ = config_module.config_path()
    named = bool(os.environ.get(config_module.ENV_VAR))
    others = [] if named else [path for path in up.running_configs() if path != using]
    if others:
        exports = " or ".join(f"export RADIUM_CONFIG={path}" for path in others)
        return f"{exports} (radium up runs there; this command read {using})"
    return "start the pool (radium up, or radium pool serve) or fix [client] pool/token"


def run_checks(
    config: Config,
    programs: dict[str, str],
    engines: Sequence[str],
    engine_paths: dict[str, Path],
) -> list[Check]:
    """Every check, in the order ``radium doctor`` prints them."""
    checks = [check_runtime(config), check_programs(programs), check_bundles(config)]
    checks += [check_engine(e, programs, engine_paths.get(e)) for e in engines]
    checks.append(check_agent(config))
    checks.extend(check_pool(config))
    return checks


def render(checks: Sequence[Check]) -> str:
    """The checks as ``radium doctor`` prints them."""
    lines = []
    for check in checks:
        lines.append(f"{check.status:<5} {check.name:<18} {check.detail}")
        if check.fix:
            lines.append(f"{'':<5} {'':<18} fix: {check.fix}")
    return "\n".join(lines) + "\n"
