"""``radium up``."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["register"]


def _up(args: argparse.Namespace) -> int:
    from radium import up

    state = args.state_dir or up.default_state_dir()
    return up.run(state, args.listen, args.cpu_devices, detach=args.detach)


def _down(args: argparse.Namespace) -> int:
    from radium import up

    return up.down(args.state_dir or up.default_state_dir())


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add this module's subcommands and their options to the ``radium`` command line."""
    parser = commands.add_parser(
        "up", help="run a pool and a CPU acceptor on this machine (the embedded default)"
    )
    parser.add_argument("--state-dir", type=Path, help="where its config, database and logs live")
    parser.add_argument(
        "--listen",
        help="pool address, set in its config; its lease socket takes the next port (default: "
        "the config's; at the first start 127.0.0.1:7400 when free, else a free port)",
    )
    parser.add_argument(
        "--cpu-devices",
        type=int,
        help="devices the CPU acceptor exposes, set in its config (default: the config's, or 2)",
    )
    parser.add_argument(
        "-d", "--detach", action="store_true", help="return once up; `radium down` stops it"
    )
    parser.set_defaults(func=_up)
    down = commands.add_parser("down", help="stop what `radium up --detach` started")
    down.add_argument("--state-dir", type=Path, help="the state directory given to radium up")
    down.set_defaults(func=_down)
