"""``radium top``: a live view of the pool's acceptors, devices and leases; ``q`` quits.

Not on a terminal, or with ``--once``, it prints one plain snapshot; ``--json`` prints the
leases exactly as ``radium leases --json`` does. The view is drawn in :mod:`.top_view` and
kept live in :mod:`.top_live`, both imported only when needed: rich and gRPC would slow every
other ``radium`` command down.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Callable, Protocol, TextIO

from radium.commands.inspect import leases_json, pool_client
from radium.errors import RadiumError

__all__ = ["ENDED_SHOWN", "Reader", "Source", "register", "run"]

#: Ended leases a refresh of the view reads (--all), the newest: a pool keeps 10,000.
ENDED_SHOWN = 100

if TYPE_CHECKING:
    from radium.commands.top_view import Snapshot
    from radium.proto import pool_pb2 as pb


class Reader(Protocol):
    """The calls of :class:`radium.poolclient.PoolClient` that ``radium top`` makes."""

    address: str

    def status(self) -> pb.StatusResponse: ...

    def leases(self, *, all_: bool = False, ended_most: int = 0) -> list[pb.Lease]: ...

    def close(self) -> None: ...


class Source:
    """The pool's state through a client ``connect`` makes, made again after a failed read: a
    new channel resolves the pool's names again (a list of replicas is resolved once per
    channel, :func:`radium.rpc.target`) and does not wait out the old one's reconnect backoff."""

    def __init__(self, connect: Callable[[], Reader], all_: bool) -> None:
        self._connect = connect
        self._all = all_
        self._client: Reader | None = None

    def read(self) -> Snapshot:
        """What the pool says now; raises RadiumError when it cannot be read."""
        from radium.commands.top_view import Snapshot

        try:
            client = self._client = self._client or self._connect()
            # Two calls, not one atomic read: a lease may end between them, which the next
            # refresh shows.
            status = client.status()
            leases = client.leases(all_=self._all, ended_most=ENDED_SHOWN)
        except RadiumError:
            self.close()
            raise
        return Snapshot(client.address, status, leases, time.time())

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def run(args: argparse.Namespace, connect: Callable[[], Reader], out: TextIO) -> int:
    """``radium top`` with ``connect`` making its pool client, writing to ``out``."""
    if args.json:
        client = connect()
        try:
            leases = client.leases(all_=args.all)
        finally:
            client.close()
        out.write(leases_json(leases) + "\n")
        return 0
    source = Source(connect, args.all)
    try:
        if args.once or not out.isatty():
            from radium.commands import top_view

            top_view.print_plain(source.read(), out)
            return 0
        from rich.console import Console

        from radium.commands import top_live

        return top_live.watch(source, args.interval, Console(file=out), sys.stdin)
    finally:
        source.close()


def _interval(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a number of seconds, got {value!r}") from None
    if not 0.1 <= seconds <= 3600:  # also refuses nan
        raise argparse.ArgumentTypeError(f"between 0.1 and 3600 seconds, got {value}")
    return seconds


def _top(args: argparse.Namespace) -> int:
    return run(args, pool_client, sys.stdout)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add this module's subcommands and their options to the ``radium`` command line."""
    parser = commands.add_parser(
        "top", help="a live view of the pool's acceptors, devices and leases (q quits)"
    )
    parser.add_argument(
        "--interval", type=_interval, default=1.0, help="seconds between refreshes (default 1)"
    )
    parser.add_argument(
        "--once", action="store_true", help="print one snapshot (as when not on a terminal)"
    )
    parser.add_argument(
        "--json", action="store_true", help="print the leases as `radium leases --json` does"
    )
    parser.add_argument("--all", action="store_true", help="include ended leases")
    parser.set_defaults(func=_top)
