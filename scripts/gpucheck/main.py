"""``scripts/gpu-check [--prepare | --dry-run]``: the command line and the run's order.

A run: install from ``.gpu-check/`` (:mod:`.install`), start the services (:mod:`.services`),
run the checks (:mod:`.checks`), stop everything it started, print the table (and write it to
``$OUT/gpu-check.txt``; with the services' logs under ``$OUT/gpu-check-logs`` when it failed).
Exit status 1 when any row failed, 2 for a usage error. The whole run has a deadline; a
SIGALRM a minute after it stops a run that hangs anyway.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType
from typing import Any

from gpucheck import cgroup, checks, install
from gpucheck.prepare import FOLDER, SERVICE_MODULES, prepare
from gpucheck.runs import Deadline, Runner
from gpucheck.table import FAIL, Table

__all__ = ["main"]

REPO = Path(__file__).resolve().parents[2]
#: The whole run, within the device tool's 10-minute command (room to spare for a rerun).
DEADLINE = 450.0


def _alarm(signum: int, frame: FrameType | None) -> None:
    """SIGALRM (past the deadline) or SIGTERM (someone stops the run): a failed row, and the
    cleanup still runs."""
    if signum == signal.SIGTERM:
        raise TimeoutError("gpu-check was stopped (SIGTERM)")
    raise TimeoutError("gpu-check ran past its deadline")


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="scripts/gpu-check", description=__doc__)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--prepare", action="store_true", help=f"fill {FOLDER}/ (needs a registry)")
    mode.add_argument("--dry-run", action="store_true", help="CPU backend, torch on CPU")
    parser.add_argument("--deadline", type=float, default=DEADLINE, metavar="S")
    parser.add_argument(
        "--python-version", default="3.12", help="with --prepare: the GPU image's CPython"
    )
    parser.add_argument("--steps", type=int, help="training steps (default: 300, dry run 30)")
    parser.add_argument("--seconds", type=float, help="each matmul loop's length")
    parser.add_argument("--size", type=int, help="the matmuls' side")
    args = parser.parse_args(argv)
    if args.deadline <= 0:
        parser.error(f"--deadline must be positive, got {args.deadline:g}")
    if os.geteuid() != 0 and not args.prepare:
        parser.error("run it as root: the acceptor sandboxes workers (bwrap, setpriv, cgroups)")
    return args


def sizes_of(args: argparse.Namespace) -> checks.Sizes:
    base = checks.DRY if args.dry_run else checks.GPU
    return checks.Sizes(
        size=args.size or base.size,
        seconds=args.seconds if args.seconds is not None else base.seconds,
        steps=args.steps or base.steps,
        batch=base.batch,
        memory=base.memory,
    )


def run(args: argparse.Namespace, table: Table, root: Path, held: dict[str, Any]) -> None:
    """Everything but the cleanup (the caller's: what it must stop goes into ``held``),
    rows into ``table``."""
    deadline = Deadline(args.deadline)
    site = install.Site(REPO, root)
    started = time.monotonic()
    table.ok("install from " + FOLDER, install.install(site, REPO / FOLDER, args.dry_run))
    held["pth"] = install.isolated_path(site)
    if not args.dry_run:
        held["cgroup"] = moved = cgroup.enter()
        if moved is not None:
            table.ok("cgroup for the acceptor", f"moved from {moved.origin} to {moved.made}")
    install.import_check(site, list(SERVICE_MODULES))
    sys.path[:0] = site.pythonpath.split(os.pathsep)  # radium, and the carried wheels
    client = install.client_python(root)
    table.ok("client Python has no torch", f"{client}: import torch fails there")
    from gpucheck.services import Services  # imports radium: only now on the path

    # The machine's own environment (LD_LIBRARY_PATH and the like) but not its Python path
    # nor any RADIUM_ variable: the run's config is its own.
    machine = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and "RADIUM" not in k}
    env = {**machine, "PATH": site.path(), "PYTHONPATH": site.pythonpath, "HOME": str(root)}
    services = Services(root / "state", sys.executable, env, args.dry_run)
    held["services"] = services
    services.start()
    services.wait_ready(min(120.0, deadline.left()))
    backend = "cpu, fractions unenforced" if args.dry_run else "nvml, fractions under MPS"
    table.ok(
        "pool, acceptor, agent up",
        f"{', '.join(services.devices())} ({backend}; process workers, sandboxed) in "
        f"{time.monotonic() - started:.1f} s",
    )
    runner = Runner(sys.executable, client, sys.executable, services.client_env,
                    "cpu" if args.dry_run else "cuda", root, deadline)  # fmt: skip
    held["runner"] = runner
    sizes = sizes_of(args)
    alone = checks.smoke(runner, table, sizes)
    checks.train(runner, table, sizes)
    checks.fractions(runner, table, sizes, alone)


def cleanup(table: Table, root: Path, out: str, held: dict[str, Any]) -> None:
    """Stop the runs still going and the services (by pid, and what outlived them), remove
    the ``.pth`` file; the services' logs into ``$OUT`` when a row failed."""
    services = held.get("services")
    pth = held.get("pth")
    runs = held["runner"].stop_all() if "runner" in held else []
    if services is not None:
        left = services.stop()
        figures = f"killed what outlived the services: pids {left}" if left else "by pid"
        if runs:
            figures += f"; runs cut short, stopped: pids {runs}"
        if pth is not None:
            figures += f"; {pth} removed"
        table.judge("everything stopped", not left, figures)
    if pth is not None:
        pth.unlink(missing_ok=True)
    if held.get("cgroup") is not None:
        held["cgroup"].undo()
    if table.failed and out and services is not None:
        logs = Path(out) / "gpu-check-logs"
        logs.mkdir(exist_ok=True)
        for log in (root / "state").glob("*.log"):
            shutil.copy(log, logs / log.name)


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.prepare:
        return prepare(REPO, args.python_version)
    title = "gpu-check" + (" --dry-run (CPU backend, torch on CPU)" if args.dry_run else "")
    table = Table(title)
    root = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    root.chmod(0o711)  # its mps/ is reached by the GPU's worker uid (its state/ stays 0700)
    signal.signal(signal.SIGALRM, _alarm)
    signal.signal(signal.SIGTERM, _alarm)
    signal.alarm(int(args.deadline) + 60)
    out = os.environ.get("OUT", "")
    held: dict[str, Any] = {}
    try:
        run(args, table, root, held)
    except Exception as exc:  # any failure is a row of the table, never a traceback
        table.add("run stopped", FAIL, f"{type(exc).__name__}: {exc}")
    finally:
        try:
            cleanup(table, root, out, held)
        finally:
            signal.alarm(0)
            sys.stdout.write(table.render())
            table.write(out or None)
            shutil.rmtree(root, ignore_errors=True)
    return 1 if table.failed else 0
