"""The ``radium`` command line: a parser assembled from :mod:`radium.commands`."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Optional, Sequence

from radium import __version__, logs
from radium.commands import (
    agent,
    bundles,
    certs,
    daemons,
    doctor,
    exec_local,
    images,
    inspect,
    queues,
    run,
    setup,
    top,
    up,
)
from radium.errors import RadiumError

log = logging.getLogger("radium.cli")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="radium", description="Remote, pooled GPUs for unmodified containers."
    )
    parser.add_argument("--version", action="version", version=f"radium {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (
        bundles, setup, daemons, inspect, top, queues, images, agent, exec_local, run, doctor,
        up, certs,
    ):  # fmt: skip
        module.register(commands)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    logs.setup("radium", "", stderr_level=logging.WARNING)
    try:
        return int(args.func(args))
    except RadiumError as exc:
        log.error("%s", exc.one_line())
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
