"""``radium run [radium options] [docker run options] IMAGE [CMD...]``."""

from __future__ import annotations

import argparse
import sys

__all__ = ["DESCRIPTION", "EPILOG", "help_parser", "register"]

DESCRIPTION = (
    "Run a container with docker run --runtime=radium and a request for remote GPUs. "
    "Radium's options come first; from the first other argument on, everything (docker run's "
    "options, the image, its command) goes to docker run unchanged."
)
EPILOG = "example: radium run --gpus 1 --remote torch --rm -it pytorch/pytorch python3 train.py"


def help_parser() -> argparse.ArgumentParser:
    """The parser ``radium run -h`` prints. It parses nothing: dockerrun.parse does, so that
    docker's options pass through untouched."""
    from radium.dockerrun import USAGE
    from radium.shim.request import PRIORITIES

    parser = argparse.ArgumentParser(
        prog="radium run", usage=USAGE, description=DESCRIPTION, epilog=EPILOG
    )
    for flags, metavar, text in (
        (("--gpus",), "N", "whole devices to lease (default 1, or none with --fraction/--memory)"),
        (("--fraction",), "F", "a fraction of one device, in (0, 1]"),
        (("--memory",), "MiB", "a part of one device with this much memory"),
        (("--queue",), "Q", "the pool queue to lease from (default: default)"),
        (("--priority",), "CLASS", f"one of {', '.join(PRIORITIES)} (default train)"),
        (("--wait",), "S", "seconds to wait for capacity, up to 3600 (default 0: fail at once)"),
        (("--remote",), "MOD", "a module (or module:function) to run remotely; repeatable"),
        (("--split",), "FILE", "a split file (TOML) saying what to remote"),
        (("--worker",), "process|container", "where the lease's worker runs"),
    ):
        parser.add_argument(*flags, metavar=metavar, help=text)
    parser.add_argument("-v", "--verbose", action="store_true", help="print the lease on stderr")
    parser.add_argument("docker", nargs="...", metavar="IMAGE", help="docker run's arguments")
    return parser


def _run(args: argparse.Namespace) -> int:
    from radium import config as config_module
    from radium import dockerrun

    if args.args[:1] in (["-h"], ["--help"]):
        sys.stdout.write(help_parser().format_help())
        return 0
    return dockerrun.run(config_module.load(), args.args)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add this module's subcommands and their options to the ``radium`` command line."""
    # No option parsing here: docker's options pass through untouched (dockerrun.parse).
    parser = commands.add_parser(
        "run",
        help="docker run --runtime=radium with a GPU request (radium run -h)",
        description=DESCRIPTION,
        prefix_chars="\0",
        add_help=False,
    )
    parser.add_argument(
        "args", nargs=argparse.REMAINDER, help="radium's options, then docker run's arguments"
    )
    parser.set_defaults(func=_run)
