"""``radium certs init|issue``: the CA and role certificates of mutual TLS between hosts."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["CONFIG_TABLE", "DEFAULT_DIR", "register"]

DEFAULT_DIR = Path("/etc/radium/certs")
#: Where each role's certificate goes in the config of the node that holds it.
CONFIG_TABLE = {"pool": "pool.tls", "acceptor": "acceptor.tls", "agent": "client.tls",
                "admin": "client.tls"}  # fmt: skip


def _init(args: argparse.Namespace) -> int:
    from radium import certs

    ca = certs.init(args.dir, days=args.days)
    sys.stdout.write(f"CA certificate {ca} (its key, {ca.with_suffix('.key')}, stays here)\n")
    return 0


def _issue(args: argparse.Namespace) -> int:
    from radium import certs

    cert, key = certs.issue(args.dir, args.role, args.name, args.host, days=args.days)
    sys.stdout.write(
        f"# {args.role} certificate for {args.name}; in that node's Radium config:\n"
        f'[{CONFIG_TABLE[args.role]}]\nca = "{args.dir / certs.CA_CERT}"\n'
        f'cert = "{cert}"\nkey = "{key}"\n'
    )
    return 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add this module's subcommands and their options to the ``radium`` command line."""
    parser = commands.add_parser("certs", help="mutual TLS: a CA and per-node certificates")
    actions = parser.add_subparsers(dest="certs_command", required=True)
    init = actions.add_parser("init", help="make the CA every node of the pool trusts")
    init.add_argument("--dir", type=Path, default=DEFAULT_DIR, help=f"default {DEFAULT_DIR}")
    init.add_argument("--days", type=int, default=3650, help="validity (default 3650)")
    init.set_defaults(func=_init)
    issue = actions.add_parser("issue", help="a certificate for one node, naming its role")
    issue.add_argument(
        "role",
        choices=("pool", "acceptor", "agent", "admin"),
        help="what the node is to the pool: its server, a GPU server, a client, an admin",
    )
    issue.add_argument("name", help="the node (or user) it is for; files NAME.pem, NAME.key")
    issue.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="where the CA is")
    issue.add_argument(
        "--host",
        action="append",
        default=[],
        help="a DNS name or IP address it answers as (pools; repeatable)",
    )
    issue.add_argument("--days", type=int, default=365, help="validity (default 365)")
    issue.set_defaults(func=_issue)
