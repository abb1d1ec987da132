"""``radium setup ENGINE``."""

from __future__ import annotations

import argparse
from pathlib import Path

from radium.constants import ENGINES

__all__ = ["register"]


def _setup(args: argparse.Namespace) -> int:
    from radium.engines import setup

    return setup.run(
        args.engine,
        remove=args.remove,
        dry_run=args.dry_run,
        set_as_default=args.set_as_default,
        path=args.config,
        dropin=args.dropin,
        restart_daemon=args.restart,
    )


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add this module's subcommands and their options to the ``radium`` command line."""
    parser = commands.add_parser(
        "setup",
        help="configure a container engine for Radium",
        description="Write the engine's configuration for Radium, idempotently, with a backup.",
    )
    parser.add_argument(
        "engine",
        choices=ENGINES,
        help="the engine to configure",
    )
    parser.add_argument(
        "--remove", action="store_true", help="take Radium's configuration out again"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the resulting files, change nothing"
    )
    parser.add_argument(
        "--set-as-default", action="store_true", help="make radium the default runtime"
    )
    parser.add_argument(
        "--config",
        type=Path,
        help="docker: daemon.json; containerd: config.toml; podman: the hooks.d directory",
    )
    parser.add_argument("--dropin", type=Path, help="containerd, crio: the drop-in file to write")
    parser.add_argument("--restart", action="store_true", help="restart the daemon through systemd")
    parser.set_defaults(func=_setup)
