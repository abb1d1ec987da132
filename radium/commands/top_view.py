"""What ``radium top`` draws: one snapshot of the pool as rich tables, live or plain."""

from __future__ import annotations

import dataclasses
import io
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from rich import box
from rich.bar import Bar
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from radium.commands.inspect import count

if TYPE_CHECKING:
    from radium.proto import pool_pb2 as pb

__all__ = [
    "BAR_WIDTH",
    "ENDED",
    "PLAIN_WIDTH",
    "SHORT_ID",
    "Snapshot",
    "acceptors",
    "ago",
    "devices",
    "duration",
    "header",
    "leases",
    "print_plain",
    "render",
    "size",
]

#: Character cells of an allocation bar.
BAR_WIDTH = 20
#: "l-" and 8 of the 16 hex digits: enough to tell a pool's leases apart on a screen.
SHORT_ID = 10
#: Wide enough that a plain snapshot (a pipe, a log) is never wrapped: tables take only the
#: width they need, and trailing blanks are stripped.
PLAIN_WIDTH = 1000
ENDED = ("released", "expired", "revoked", "preempted")


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """What the pool at ``address`` said at ``taken_at`` (unix time).

    With ``error``, the last read failed: ``status`` and ``leases`` are then the last ones
    read, if any, so a pool that goes away leaves its last state on the screen.
    """

    address: str
    status: pb.StatusResponse | None = None
    leases: Sequence[pb.Lease] = ()
    taken_at: float = 0.0
    error: str = ""


def size(n: int) -> str:
    """Bytes in binary units, as the rest of Radium counts memory (MiB)."""
    if n < 1024:
        return f"{n} B"
    value = n / 1024
    for unit in ("KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def duration(seconds: float) -> str:
    """A short duration: 42s, 7m, 3h, 2d."""
    seconds = max(seconds, 0.0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size:.0f}{unit}"
    return f"{seconds:.0f}s"


def ago(then: float, now: float) -> str:
    """How long ago ``then`` was, in whole seconds ("never" for 0)."""
    return "never" if not then else f"{max(now - then, 0):.0f}s ago"


#: Right-aligned columns.
_NUMERIC = frozenset(
    ("MEMORY", "%", "ALLOC MiB", "FRACTION", "CPU", "RSS", "CALLS", "ERRORS",
     "BUSY", "IN", "OUT", "AGE")
)  # fmt: skip


def _table(title: str, *columns: str) -> Table:
    table = Table(
        title=title, title_justify="left", title_style="bold", box=box.SIMPLE_HEAD,
        show_edge=False, pad_edge=False, collapse_padding=True,
    )  # fmt: skip
    for column in columns:
        # Holders (a node and a 64-digit container id) are cut short with an ellipsis when
        # the screen is too narrow; every other column keeps its width.
        wide = column in ("HOLDER", "HOLDERS")
        table.add_column(
            column,
            justify="right" if column in _NUMERIC else "left",
            no_wrap=not wide,
            overflow="ellipsis",
            min_width=12 if wide else None,
        )
    return table


def _row(table: Table, *cells: object, style: str = "") -> None:
    # Text, not str: a holder or an error message must never be read as rich markup.
    table.add_row(*(c if isinstance(c, (Text, Bar)) else Text(str(c)) for c in cells), style=style)


def _state(up: bool) -> Text:
    return Text("up", style="green") if up else Text("DOWN", style="bold red")


def acceptors(status: pb.StatusResponse, now: float) -> Table:
    """The acceptors table: state, data-plane address, devices, last heartbeat."""
    table = _table("ACCEPTORS", "ACCEPTOR", "STATE", "DATA PLANE", "DEVICES", "HEARTBEAT")
    for a in status.acceptors:
        _row(table, a.name, _state(a.up), a.data_address, a.devices, ago(a.last_heartbeat, now))
    return table


def devices(status: pb.StatusResponse) -> Table:
    """The devices table: what the pool has allocated on each device, and to whom."""
    # The pool knows what it has allocated on a device, not how busy the device is: the bar
    # says "allocated" so it is not read as utilisation.
    table = _table(
        "DEVICES", "ACCEPTOR", "DEVICE", "MODEL", "MEMORY", "ALLOCATED", "%", "ALLOC MiB",
        "STATE", "HOLDERS",
    )  # fmt: skip
    for d in status.devices:
        fraction = min(max(d.allocated_fraction, 0.0), 1.0)
        _row(
            table,
            d.acceptor,
            d.device.id,
            f"{d.device.vendor} {d.device.model}".strip(),
            f"{d.device.memory_mib} MiB",
            Bar(1.0, 0.0, fraction, width=BAR_WIDTH, color="cyan", bgcolor="grey23"),
            f"{d.allocated_fraction * 100:.0f}%",
            d.allocated_mib,
            _state(d.up),
            ",".join(d.holders) or "-",
        )
    return table


def leases(rows: Sequence[pb.Lease], now: float) -> Table:
    """The leases table: where each is, for whom, what its worker uses."""
    table = _table(
        "LEASES", "LEASE", "HOLDER", "QUEUE", "PRIORITY", "STATE", "AGE", "ACCEPTOR",
        "DEVICES", "FRACTION", "CPU", "RSS", "GPU MEM", "SM", "CALLS", "ERRORS", "BUSY", "IN",
        "OUT",
    )  # fmt: skip
    for le in rows:
        live = le.state not in ENDED
        _row(
            table,
            le.id[:SHORT_ID],
            le.holder or "-",
            le.queue or "default",
            le.priority or "train",
            Text(le.state, style="yellow" if le.preempted_at else ""),
            duration(now - le.created_at) if le.created_at else "-",
            le.acceptor,
            ",".join(le.device_ids),
            f"{le.fraction:.2f}",
            f"{le.cpu_percent:.0f}%",
            size(le.rss_bytes),
            size(le.gpu_memory_bytes),
            f"{le.gpu_sm_percent:.0f}%",
            le.calls,
            le.errors,
            f"{le.busy_seconds:.1f}s",
            size(le.bytes_in),
            size(le.bytes_out),
            style="" if live else "dim",
        )
    return table


def header(snapshot: Snapshot) -> Text:
    """The screen's first line: the pool's version and its totals."""
    status = snapshot.status
    if status is None:
        return Text(f"radium top: pool at {snapshot.address}", style="bold")
    up = sum(1 for a in status.acceptors if a.up)
    clock = time.strftime("%H:%M:%S", time.localtime(snapshot.taken_at))
    return Text(
        f"radium top: pool {status.version} at {snapshot.address}, {clock}: "
        f"{count(len(status.acceptors), 'acceptor')} ({up} up), "
        f"{count(len(status.devices), 'device')}, "
        f"{count(status.active_leases, 'active lease')}",
        style="bold",
    )


def render(snapshot: Snapshot, now: float, footer: str = "") -> RenderableType:
    """One screen of ``radium top`` for ``snapshot``."""
    parts: list[RenderableType] = [header(snapshot)]
    if snapshot.error:
        last = f"; last read {ago(snapshot.taken_at, now)}" if snapshot.status else ""
        parts.append(Text(f"error: {snapshot.error}{last}", style="bold red"))
    status = snapshot.status
    if status is not None:
        for table in (acceptors(status, now), devices(status), leases(snapshot.leases, now)):
            parts += [Text(""), table]
    if footer:
        parts += [Text(""), Text(footer, style="dim")]
    return Group(*parts)


def print_plain(snapshot: Snapshot, out: TextIO, now: float | None = None) -> None:
    """One snapshot: coloured on a terminal, plain text (no escapes, no wrapping) elsewhere."""
    view = render(snapshot, time.time() if now is None else now)
    if out.isatty():
        Console(file=out).print(view)
        return
    buffer = io.StringIO()
    Console(file=buffer, width=PLAIN_WIDTH, color_system=None).print(view)
    out.write("".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines()))
