"""``radium doctor``: check the installation and say how to fix each failure."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

__all__ = ["register"]


def _doctor(args: argparse.Namespace) -> int:
    from radium import config as config_module
    from radium import doctor
    from radium.engines import setup

    programs = setup.installed_programs()
    if args.scripts:
        programs.update({name: str(args.scripts / name) for name in setup.PROGRAMS})
    paths = {"docker": args.docker_config} if args.docker_config else {}
    checks = doctor.run_checks(
        config_module.load(), programs, args.engine or list(doctor.ENGINE_PROGRAMS), paths
    )
    if args.json:
        json.dump([dataclasses.asdict(c) for c in checks], sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(doctor.render(checks))
    return 1 if any(c.status == "FAIL" for c in checks) else 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add this module's subcommands and their options to the ``radium`` command line."""
    parser = commands.add_parser("doctor", help="check this installation and explain the fixes")
    parser.add_argument(
        "--engine",
        action="append",
        choices=["docker", "containerd", "crio", "podman"],
        help="check only this engine (repeatable; default: every installed engine)",
    )
    parser.add_argument("--docker-config", type=Path, help="daemon.json to check")
    parser.add_argument("--scripts", type=Path, help="where Radium's programs are installed")
    parser.add_argument("--json", action="store_true", help="print the checks as JSON")
    parser.set_defaults(func=_doctor)
