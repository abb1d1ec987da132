"""``radium images add|ls|rm``: the images every acceptor holds (for container-mode workers)."""

from __future__ import annotations

import argparse
import json
import sys

from radium.commands.inspect import as_dicts, pool_client, table

__all__ = ["FAILED", "register"]

FAILED = "failed"


def _follow(stream: object) -> int:
    from radium.progress import Bars

    bars = Bars(sys.stdout)
    rows: list = []  # type: ignore[type-arg]
    for update in stream:  # type: ignore[attr-defined]
        rows = list(update.acceptors)
        bars.update(rows)
    print()
    print(
        table(
            ("ACCEPTOR", "STATE", "DIGEST", "ERROR"),
            [(r.acceptor, r.state, r.digest or "-", r.error or "-") for r in rows],
        )
    )
    if not rows:
        print("no acceptor is up: each pulls the image when it registers")
    return 1 if any(r.state == FAILED for r in rows) else 0


def _add(args: argparse.Namespace) -> int:
    return _follow(pool_client().add_image(args.image, timeout=args.timeout))


def _rm(args: argparse.Namespace) -> int:
    return _follow(pool_client().remove_image(args.image, timeout=args.timeout))


def _ls(args: argparse.Namespace) -> int:
    images = pool_client().list_images()
    if args.json:
        print(json.dumps(as_dicts(images)))
        return 0
    rows = [(i.ref, i.acceptor, i.state, i.digest or "-") for i in images]
    print(table(("IMAGE", "ACCEPTOR", "STATE", "DIGEST"), rows))
    return 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add this module's subcommands and their options to the ``radium`` command line."""
    parser = commands.add_parser("images", help="images the acceptors pull and keep")
    sub = parser.add_subparsers(dest="images_command", required=True, metavar="COMMAND")
    add = sub.add_parser("add", help="register an image; every acceptor pulls it")
    rm = sub.add_parser("rm", help="unregister an image; every acceptor removes it")
    for command, func in ((add, _add), (rm, _rm)):
        command.add_argument("image", help="the image reference, as docker pull takes it")
        command.add_argument("--timeout", type=float, default=3600.0, help="seconds to follow")
        command.set_defaults(func=func)
    ls = sub.add_parser("ls", help="which acceptor has which image (and its digest)")
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.set_defaults(func=_ls)
