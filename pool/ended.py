"""Which ended leases a store keeps: the newest :data:`ENDED_KEPT`, none past the retention.

`radium leases --all` lists leases that ended, and the pool keeps them for a week. A pool that
churns through thousands of leases a second ends as many: kept for a week, they would fill
SQLite's disk in hours, and etcd's space quota (2 GB by default; past it etcd refuses every
write, and the pool stops granting) sooner. So a store forgets the oldest as new ones end, in
the same write, and the reaper's prune forgets those past the retention; neither searches the
store for them: :class:`EndedLog` names them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable

from radium.pool.model import Lease

#: Ended leases a store keeps, at most (the newest).
ENDED_KEPT = 10_000


class EndedLog:
    """The ended leases a store holds, oldest first (end time, id): read from the store on
    first use or :meth:`read`, then kept as leases end. An id it names is gone from it: if the
    write that forgets it fails, the store keeps that lease until the next pool reads the
    log afresh."""

    def __init__(self, read: Callable[[], Iterable[tuple[float, str]]], kept: int) -> None:
        self._read = read
        self.kept = kept
        self._log: deque[tuple[float, str]] | None = None

    def read(self) -> deque[tuple[float, str]]:
        """Read the log from the store now: SQLite does when the pool loads its state, so its
        first ended lease does not wait for it; etcd not (a new leader must serve first)."""
        self._log = deque(sorted(self._read()))
        return self._log

    def _held(self) -> deque[tuple[float, str]]:
        return self._log if self._log is not None else self.read()

    def ended(self, leases: Iterable[Lease]) -> list[str]:
        """Note leases that end now; the ids to forget with them (the oldest beyond kept)."""
        log = self._held()
        log.extend((lease.ended_at, lease.id) for lease in leases)
        return [log.popleft()[1] for _ in range(len(log) - self.kept)]

    def forget(self, ended_before: float) -> list[str]:
        """The ids to forget now: beyond kept, or ended before ``ended_before``."""
        log = self._held()
        gone = [log.popleft()[1] for _ in range(len(log) - self.kept)]
        while log and log[0][0] < ended_before:
            gone.append(log.popleft()[1])
        return gone
