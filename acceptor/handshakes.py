"""The data-plane listener's unauthenticated connections: a table with limits, not threads.

A connection that has not proved a lease credential holds an entry here (its socket and the
handshake's state), never a thread: the listener's one loop reads each handshake frame as its
bytes arrive, so an idle or trickling peer costs a descriptor until its deadline, whatever it
sends. The table bounds what a peer can hold:

- each handshake has ``HANDSHAKE_DEADLINE`` for the whole exchange, from accept to WELCOME;
- one source (an IPv4 address, an IPv6 /64) holds at most ``PER_SOURCE`` entries, and the table
  at most ``MAX_PENDING``: a new connection past either limit closes that source's (or the
  table's) oldest entry. A legitimate handshake is done within a round trip of its accept, so
  the oldest entry is a stalled one; the new connection is never the one refused.

All of it runs on the listener's thread: nothing here locks.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import resource
import socket
import time

from radium_interposer.handshake import FrameBuffer, ServerHandshake

__all__ = [
    "HANDSHAKE_DEADLINE",
    "LOG_BURST",
    "LOG_WINDOW",
    "MAX_PENDING",
    "PER_SOURCE",
    "Pending",
    "Table",
    "Throttled",
    "pending_limit",
    "source_of",
]

log = logging.getLogger("radium.acceptor.dataplane")
#: The whole handshake, accept to WELCOME, however slowly the peer sends.
HANDSHAKE_DEADLINE = 10.0
#: Unauthenticated connections at once, all sources (lowered to a quarter of the open-files
#: limit: each is a descriptor).
MAX_PENDING = 1024
#: Unauthenticated connections at once from one source. A client node's agent dials from one
#: address for all its containers, at most 32 at once (its thread pool); a handshake takes a
#: round trip, so 64 leaves room for a legitimate burst.
PER_SOURCE = 64
#: At most this many lines a kind per LOG_WINDOW seconds; the rest are counted in one line.
LOG_BURST = 5
LOG_WINDOW = 10.0


def source_of(peer: object) -> str:
    """The source a peer counts against: its IPv4 address, or its IPv6 /64 (one host may
    hold a whole /64)."""
    host = str(peer[0]) if isinstance(peer, tuple) else str(peer)
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


def pending_limit() -> int:
    """MAX_PENDING, or a quarter of this process's open-files limit if that is lower."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_PENDING
    return max(16, min(MAX_PENDING, soft // 4))


@dataclasses.dataclass(eq=False)
class Pending:
    """One unauthenticated connection and where its handshake stands."""

    sock: socket.socket
    peer: object
    source: str
    deadline: float
    state: ServerHandshake = dataclasses.field(default_factory=ServerHandshake)
    frame: FrameBuffer = dataclasses.field(default_factory=FrameBuffer)
    #: True once HELLO was answered: the next frame is PROOF.
    challenged: bool = False
    #: While waiting for the grant of a lease this acceptor has not seen yet: until when.
    grant_until: float = 0.0


class Table:
    """The unauthenticated connections, oldest first, with the per-source and total limits."""

    def __init__(self, limit: int | None = None, per_source: int = PER_SOURCE) -> None:
        self.limit = pending_limit() if limit is None else limit
        self.per_source = per_source
        self.entries: dict[int, Pending] = {}  # insertion order: oldest (first deadline) first
        self.sources: dict[str, dict[int, Pending]] = {}

    def __len__(self) -> int:
        return len(self.entries)

    def add(self, pending: Pending) -> Pending | None:
        """Take a new connection; the entry it pushes out (to be closed), if any."""
        mine = self.sources.setdefault(pending.source, {})
        evicted: Pending | None = None
        if len(mine) >= self.per_source:
            evicted = next(iter(mine.values()))
        elif len(self.entries) >= self.limit:
            evicted = next(iter(self.entries.values()))
        if evicted is not None:
            self.remove(evicted)
        mine[id(pending)] = self.entries[id(pending)] = pending
        return evicted

    def remove(self, pending: Pending) -> None:
        """Forget an entry (authenticated, refused or closed)."""
        if self.entries.pop(id(pending), None) is None:
            return
        mine = self.sources[pending.source]
        del mine[id(pending)]
        if not mine:
            del self.sources[pending.source]

    def count(self, source: str) -> int:
        return len(self.sources.get(source, ()))

    def expired(self, now: float) -> list[Pending]:
        """The entries past their deadline (removed); deadlines follow accept order."""
        late = []
        for pending in self.entries.values():
            if pending.deadline > now:
                break
            late.append(pending)
        for pending in late:
            self.remove(pending)
        return late

    def next_deadline(self) -> float | None:
        return next(iter(self.entries.values())).deadline if self.entries else None


class Throttled:
    """Warnings of one kind, at most LOG_BURST per LOG_WINDOW; the rest summed up in one line,
    so a flood of refused connections cannot flood the log too."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.window_start = 0.0
        self.logged = 0
        self.suppressed = 0

    def warn(self, message: str, *args: object) -> None:
        now = time.monotonic()
        if now - self.window_start >= LOG_WINDOW:
            if self.suppressed:
                log.warning(
                    "data plane: %d more %s in the last %gs",
                    self.suppressed,
                    self.what,
                    round(now - self.window_start),
                )
            self.window_start, self.logged, self.suppressed = now, 0, 0
        if self.logged < LOG_BURST:
            self.logged += 1
            log.warning(message, *args)
        else:
            self.suppressed += 1
