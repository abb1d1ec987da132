"""``radium queues add|set|ls|rm``: the teams sharing the pool (docs/scheduling.md)."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from radium.commands.inspect import as_dicts, pool_client, table

__all__ = ["DEFAULTS", "register"]

#: Queue fields a command line may set, with their defaults for a new queue.
DEFAULTS = {"deserved": 0.0, "weight": 1.0, "limit": -1.0, "priority": 0, "parent": ""}


def _limit(value: str) -> float:
    """GPUs, or "none" (stored as -1)."""
    if value.lower() == "none":
        return -1.0
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a number of GPUs or 'none', got {value!r}") from None
    if math.isnan(number):
        raise argparse.ArgumentTypeError("a number of GPUs or 'none', got nan")
    return number


def _queue(args: argparse.Namespace, current: Any = None) -> Any:
    """A ``pb.Queue``: ``current`` (or a new queue's defaults) with the options given."""
    from radium.proto import pool_pb2 as pb

    queue = pb.Queue(name=args.name)
    if current is not None:
        queue.CopyFrom(current)
    for key, default in DEFAULTS.items():
        value = getattr(args, key)
        if value is not None or current is None:
            setattr(queue, key, default if value is None else value)
    return queue


def _show(queue: object) -> int:
    print(json.dumps(as_dicts([queue])[0]))
    return 0


def _add(args: argparse.Namespace) -> int:
    return _show(pool_client().set_queue(_queue(args), create=True))


def _set(args: argparse.Namespace) -> int:
    client = pool_client()
    current = next((s.queue for s in client.queues() if s.queue.name == args.name), None)
    return _show(client.set_queue(_queue(args, current), create=False))


def _rm(args: argparse.Namespace) -> int:
    return _show(pool_client().remove_queue(args.name))


def _gpus(value: float) -> str:
    return "none" if value < 0 else f"{value:g}"


def _ls(args: argparse.Namespace) -> int:
    statuses = pool_client().queues()
    if args.json:
        print(json.dumps(as_dicts(statuses), indent=2))
        return 0
    rows = [
        (
            s.queue.name,
            s.queue.parent or "-",
            f"{s.deserved:g}",
            f"{s.queue.weight:g}",
            _gpus(s.queue.limit),
            s.queue.priority,
            f"{s.allocated:.2f}",
            f"{s.fair_share:.2f}",
            s.leases,
            s.waiting,
        )
        for s in statuses
    ]
    headers = ("QUEUE", "PARENT", "DESERVED", "WEIGHT", "LIMIT", "PRIORITY", "ALLOCATED",
               "FAIR SHARE", "LEASES", "WAITING")  # fmt: skip
    print(table(headers, rows))
    return 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add this module's subcommands and their options to the ``radium`` command line."""
    parser = commands.add_parser(
        "queues", help="the pool's queues: guaranteed GPUs, borrowing weight, limit, priority"
    )
    sub = parser.add_subparsers(dest="queues_command", required=True, metavar="COMMAND")
    add = sub.add_parser("add", help="add a queue")
    change = sub.add_parser("set", help="change a queue (only the options given)")
    for command, func in ((add, _add), (change, _set)):
        command.add_argument("name", help="the queue")
        command.add_argument(
            "--deserved", type=float, help="GPUs guaranteed (reclaimed from others when asked)"
        )
        command.add_argument(
            "--weight", type=float, help="share of idle GPUs lent over quota (default 1)"
        )
        command.add_argument(
            "--limit", type=_limit, help="most GPUs held at once, or 'none' (default)"
        )
        command.add_argument(
            "--priority", type=int, help="higher gets its quota, then idle GPUs, first"
        )
        command.add_argument("--parent", help="the department queue this one belongs to")
        command.set_defaults(func=func)
    rm = sub.add_parser("rm", help="remove a queue that holds no lease")
    rm.add_argument("name", help="the queue")
    rm.set_defaults(func=_rm)
    ls = sub.add_parser("ls", help="every queue: its quota, what it holds, its fair share now")
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.set_defaults(func=_ls)
