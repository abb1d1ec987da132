"""Which ended leases a store keeps: the newest :data:`ENDED_KEPT` (and up to 1 % more, at
most :data:`FORGET_BATCH`, forgotten together), none past the retention.

`radium leases --all` lists leases that ended, and the pool keeps them for a week. A pool that
churns through thousands of leases a second ends as many: kept for a week, they would fill
SQLite's disk in hours, and etcd's space quota (2 GB by default; past it etcd refuses every
write, and the pool stops granting) sooner. So a store forgets the oldest as new ones end, in
the same write, and the reaper's prune forgets those past the retention; neither searches the
store for them: :class:`EndedLog` names them.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable

from radium.config import PoolConfig
from radium.errors import RadiumError
from radium.pool.model import Lease

log = logging.getLogger(__name__)

#: Ended leases a store keeps, at most (the newest), unless [pool] ended_kept says otherwise.
ENDED_KEPT = PoolConfig.ended_kept
#: A store that holds more than it keeps (one written before the bound, or with a larger one)
#: sheds the excess a little at a time: each change that ends leases forgets at most this many
#: besides as many as it ends, and each prune at most :data:`PRUNE_MOST`. In one write, half a
#: million held the pool's loop 3.3 s on SQLite; on etcd it would be thousands of transactions.
EXCESS_STEP = 100
PRUNE_MOST = 1_000
#: Ended leases held beyond the bound before they are forgotten, all in one write: 1 % of the
#: bound, at most this many. Forgetting one as each lease ends cost SQLite a savepoint and a
#: second statement per release (457,000 against 433,000 instructions an allocate+release
#: cycle, in-process under callgrind), and etcd a delete in each release's transaction.
FORGET_BATCH = 64

Entry = tuple[float, str]  # (end time, lease id)


class EndedLog:
    """The ended leases a store holds, oldest first (end time, id): read from the store on
    first use, :meth:`read` or :meth:`read_in_background`, then kept as leases end. An id it
    names is gone from it: if the write that forgets it fails, the store keeps that lease until
    the next pool reads the log afresh."""

    def __init__(
        self,
        read: Callable[[], Iterable[Entry]],
        kept: int,
        step: int = EXCESS_STEP,
        prune_most: int = PRUNE_MOST,
    ) -> None:
        self._read = read
        self.kept = kept
        self.step = step
        self.prune_most = prune_most
        self.batch = max(1, min(FORGET_BATCH, kept // 100))
        self._log: deque[Entry] | None = None
        #: The read in the background, while it runs or until its result is taken.
        self.reading: concurrent.futures.Future[list[Entry]] | None = None
        #: Leases that ended while the log was being read in the background.
        self._early: list[Entry] = []

    def read(self) -> deque[Entry]:
        """Read the log from the store now: SQLite does when the pool loads its state, so its
        first ended lease does not wait for it."""
        self._log = deque(sorted(self._read()))
        return self._log

    def read_in_background(self) -> None:
        """Read the log in a thread of its own: a new etcd leader must serve first, and
        reading 10,000 ended leases takes etcd's gateway about 0.4 s. Until it is read, leases
        still end (and are noted), but none is forgotten."""
        self._log, self._early = None, []
        self._start_reading()

    def _start_reading(self) -> None:
        reading: concurrent.futures.Future[list[Entry]] = concurrent.futures.Future()

        def run() -> None:
            try:
                reading.set_result(list(self._read()))
            except BaseException as exc:  # told to the loop's next use of the log
                reading.set_exception(exc)

        self.reading = reading
        threading.Thread(target=run, name="radium-ended-log", daemon=True).start()

    def _held(self, retry: bool = False) -> deque[Entry] | None:
        """The log; None while it is read in the background (``retry``: start that read
        again if it failed)."""
        if self._log is not None:
            return self._log
        if self.reading is None:
            return self.read()
        if not self.reading.done():
            return None
        try:
            entries = self.reading.result()
        except Exception as exc:
            if retry:
                log.warning("reading the ended leases again: %s", _one_line(exc))
                self._start_reading()
            return None
        # A lease that ended meanwhile may be in both: once by its id.
        merged = {lease_id: (at, lease_id) for at, lease_id in [*entries, *self._early]}
        self._log, self._early, self.reading = deque(sorted(merged.values())), [], None
        return self._log

    def ended(self, leases: Iterable[Lease]) -> list[str]:
        """Note leases that end now; the ids to forget with them: none until :attr:`batch` are
        beyond kept, then the oldest beyond kept, at most :attr:`step` more than end now."""
        entries = [(lease.ended_at, lease.id) for lease in leases]
        log = self._held()
        if log is None:
            self._early.extend(entries)
            return []
        log.extend(entries)
        beyond = len(log) - self.kept
        if beyond < self.batch:
            return []
        return self._oldest(log, min(beyond, len(entries) + self.step))

    def forget(self, ended_before: float) -> list[str]:
        """The ids to forget now, at most :attr:`prune_most`: beyond kept, or ended before
        ``ended_before``. A read in the background that failed starts again here (the reaper
        prunes once a minute)."""
        log = self._held(retry=True)
        if log is None:
            return []
        gone = self._oldest(log, min(len(log) - self.kept, self.prune_most))
        while log and log[0][0] < ended_before and len(gone) < self.prune_most:
            gone.append(log.popleft()[1])
        return gone

    @staticmethod
    def _oldest(log: deque[Entry], count: int) -> list[str]:
        return [log.popleft()[1] for _ in range(count)]


def _one_line(error: BaseException) -> str:
    return error.one_line() if isinstance(error, RadiumError) else repr(error)
