"""``radium gpus``, ``radium leases``, ``radium status``: what the pool has, as tables or JSON."""

from __future__ import annotations

import argparse
import json
import time
from typing import TYPE_CHECKING, Any, Sequence

from radium import config as config_module

if TYPE_CHECKING:
    from radium.poolclient import PoolClient


__all__ = ["as_dicts", "count", "leases_json", "pool_client", "register", "table"]


def pool_client() -> PoolClient:
    """Imported here: grpc costs every other radium command a tenth of a second."""
    from radium.poolclient import PoolClient

    settings = config_module.load().client
    return PoolClient.of(settings)


def as_dicts(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """Protobuf messages as the dictionaries ``--json`` prints."""
    from google.protobuf.json_format import MessageToDict

    return [MessageToDict(m, preserving_proto_field_name=True) for m in messages]


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """``rows`` under ``headers`` as aligned text columns."""
    cells = [list(map(str, headers))] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)


def count(n: int, noun: str) -> str:
    """``1 acceptor``, ``2 acceptors``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _gpus(args: argparse.Namespace) -> int:
    status = pool_client().status()
    if args.json:
        print(
            json.dumps(
                as_dicts(status.devices),
                indent=2,
            )
        )
        return 0
    rows = [
        (
            d.acceptor,
            d.device.id,
            d.device.vendor,
            d.device.model,
            d.device.memory_mib,
            # How fractional leases share it (docs/gpus.md): "-" where the acceptor says nothing.
            d.device.labels.get("sharing", "-"),
            f"{d.allocated_fraction:.2f}",
            "up" if d.up else "DOWN",
            ",".join(d.holders) or "-",
        )
        for d in status.devices
    ]
    print(
        table(
            (
                "ACCEPTOR",
                "DEVICE",
                "VENDOR",
                "MODEL",
                "MEMORY MiB",
                "SHARING",
                "ALLOCATED",
                "STATE",
                "HOLDERS",
            ),
            rows,
        )
    )
    return 0


def leases_json(leases: Sequence[Any]) -> str:
    """`radium leases --json` (and `radium top --json`)."""
    return json.dumps(as_dicts(leases), indent=2)


def _leases(args: argparse.Namespace) -> int:
    leases = pool_client().leases(all_=args.all)
    if args.json:
        print(leases_json(leases))
        return 0
    now = time.time()
    rows = [
        (
            le.id,
            le.state,
            le.holder or "-",
            le.queue or "default",
            le.priority or "train",
            _preempted(le, now),
            le.acceptor,
            ",".join(le.device_ids),
            f"{le.fraction:.2f}",
            le.memory_mib,
            f"{le.cpu_percent:.0f}%",
            f"{le.rss_bytes >> 20}",
            f"{le.gpu_memory_bytes >> 20}",
            f"{le.gpu_sm_percent:.0f}%",
            f"{le.expires_at - now:.0f}s" if le.state == "active" else "-",
        )
        for le in leases
    ]
    print(
        table(
            (
                "LEASE",
                "STATE",
                "HOLDER",
                "QUEUE",
                "PRIORITY",
                "PREEMPTED",
                "ACCEPTOR",
                "DEVICES",
                "FRACTION",
                "MiB",
                "CPU",
                "RSS MiB",
                "GPU MiB",
                "SM",
                "EXPIRES IN",
            ),
            rows,
        )
    )
    return 0


def _preempted(lease: Any, now: float) -> str:
    """For which queue, and how long ago, a lease was told it is preempted."""
    if not lease.preempted_at:
        return "-"
    return f"for {lease.preempted_for or 'default'}, {now - lease.preempted_at:.0f}s ago"


def _status(args: argparse.Namespace) -> int:
    status = pool_client().status()
    if args.json:
        print(json.dumps(as_dicts([status])[0], indent=2))
        return 0
    up = sum(1 for a in status.acceptors if a.up)
    print(
        f"pool {status.version}: {count(len(status.acceptors), 'acceptor')} ({up} up), "
        f"{count(len(status.devices), 'device')}, {count(status.active_leases, 'active lease')}"
    )
    rows = [(a.name, a.data_address, "up" if a.up else "DOWN", a.devices) for a in status.acceptors]
    if rows:
        print(table(("ACCEPTOR", "DATA PLANE", "STATE", "DEVICES"), rows))
    return 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add this module's subcommands and their options to the ``radium`` command line."""
    for name, func, text in (
        ("gpus", _gpus, "every device in the pool: vendor, memory, what is allocated, to whom"),
        ("leases", _leases, "the pool's leases"),
        ("status", _status, "the pool and its acceptors"),
    ):
        parser = commands.add_parser(name, help=text)
        parser.add_argument("--json", action="store_true", help="print JSON")
        if name == "leases":
            parser.add_argument("--all", action="store_true", help="include ended leases")
        parser.set_defaults(func=func)
