"""``radium run [radium options] [docker run options] IMAGE [CMD...]``."""

from __future__ import annotations

import argparse
import sys


def _run(args: argparse.Namespace) -> int:
    from radium import config as config_module
    from radium import dockerrun

    if args.args[:1] in (["-h"], ["--help"]):
        sys.stdout.write(f"usage: {dockerrun.USAGE}\n")
        return 0
    return dockerrun.run(config_module.load(), args.args)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    # No option parsing here: docker's options pass through untouched (dockerrun.parse).
    parser = commands.add_parser(
        "run",
        help="docker run --runtime=radium with a GPU request (radium run -h)",
        prefix_chars="\0",
        add_help=False,
    )
    parser.add_argument("args", nargs=argparse.REMAINDER)
    parser.set_defaults(func=_run)
