"""``radium exec [--gpus N] --remote MODULE... -- CMD...``."""

from __future__ import annotations

import argparse

from radium.shim.request import PRIORITIES


def _exec(args: argparse.Namespace) -> int:
    from radium import config as config_module
    from radium import execute

    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    return execute.run(config_module.load(), command, args.remote, args.split, request_of(args))


def request_of(args: argparse.Namespace) -> dict[str, str]:
    """The lease request, as the ``radium.io/`` annotations a container would carry."""
    # No amount named: one whole device (shim.request.allocation); --fraction alone: a part.
    request = {} if args.gpus is None else {"radium.io/gpus": str(args.gpus)}
    if args.fraction:
        request["radium.io/fraction"] = str(args.fraction)
    for key in ("queue", "priority", "wait", "image", "worker"):
        if getattr(args, key):
            request[f"radium.io/{key}"] = getattr(args, key)
    return request


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "exec", help="run a local command whose chosen modules run on a leased acceptor"
    )
    parser.add_argument(
        "--gpus", type=int, help="whole devices to lease (default 1, or none with --fraction)"
    )
    parser.add_argument("--fraction", type=float, default=0.0, help="a fraction of one device")
    parser.add_argument("--queue", help="the pool queue to lease from (default: default)")
    parser.add_argument(
        "--priority",
        choices=PRIORITIES,
        help="inference or build: never preempted, within the queue's quota; "
        "train (default) or batch: may borrow idle GPUs and be preempted",
    )
    parser.add_argument(
        "--wait",
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
