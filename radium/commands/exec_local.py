"""``radium exec [--gpus N] --remote MODULE... -- CMD...``."""

from __future__ import annotations

import argparse

from radium.constants import ANNOTATION_PREFIX
from radium.errors import SpecError, UsageError
from radium.shim.request import PRIORITIES, checked

__all__ = ["HELP", "REQUEST_OPTIONS", "register", "request_of"]

HELP = "see radium exec -h"


def _exec(args: argparse.Namespace) -> int:
    from radium import config as config_module
    from radium import execute

    request = request_of(args)  # before anything is loaded, started or leased
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    return execute.run(config_module.load(), command, args.remote, args.split, request)


#: The options that make the request, each checked as the runtime checks its annotation.
REQUEST_OPTIONS = ("gpus", "fraction", "memory", "queue", "priority", "wait", "image", "worker")


def request_of(args: argparse.Namespace) -> dict[str, str]:
    """The lease request, as the ``radium.io/`` annotations a container would carry.

    Each value is checked here, naming the option the user typed: a bad one is a UsageError
    before any agent is asked (``--fraction 0`` is refused, not read as "not given").
    """
    request = {}
    for key in REQUEST_OPTIONS:
        value = getattr(args, key)
        if value is None:
            continue
        try:
            request[f"{ANNOTATION_PREFIX}{key}"] = checked(key, value, f"--{key}")
        except SpecError as exc:
            raise UsageError(exc.message, hint=HELP) from None
    if f"{ANNOTATION_PREFIX}fraction" in request and f"{ANNOTATION_PREFIX}memory" in request:
        raise UsageError("--fraction and --memory exclude each other", hint=HELP)
    # No amount named: one whole device (shim.request.allocation); --fraction or --memory
    # alone: a part of one.
    return request


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add this module's subcommands and their options to the ``radium`` command line."""
    parser = commands.add_parser(
        "exec", help="run a local command whose chosen modules run on a leased acceptor"
    )
    parser.add_argument(
        "--gpus",
        metavar="N",
        help="whole devices to lease (default 1, or none with --fraction or --memory)",
    )
    parser.add_argument("--fraction", metavar="F", help="a fraction of one device, in (0, 1]")
    parser.add_argument("--memory", metavar="MiB", help="a part of one device with this memory")
    parser.add_argument("--queue", help="the pool queue to lease from (default: default)")
    parser.add_argument(
        "--priority",
        choices=PRIORITIES,
        help="inference or build: never preempted, within the queue's quota; "
        "train (default) or batch: may borrow idle GPUs and be preempted",
    )
    parser.add_argument(
        "--wait",
        metavar="S",
        help="seconds to wait for capacity (queued fairly; may reclaim the queue's quota)",
    )
    parser.add_argument(
        "--remote",
        action="append",
        default=[],
        metavar="MODULE",
        help="a module (or module:function) to run remotely; repeatable",
    )
    parser.add_argument("--split", metavar="FILE", help="a split file (TOML) saying what to remote")
    parser.add_argument(
        "--image",
        help="a registered image: the worker runs inside it on the acceptor (container mode)",
    )
    parser.add_argument(
        "--worker", choices=("process", "container"), help="where the lease's worker runs"
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD [ARGS...]")
    parser.set_defaults(func=_exec)
