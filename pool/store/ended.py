"""Which ended leases a store keeps: the newest :data:`ENDED_KEPT` (and up to 1 % more, at
most :data:`FORGET_BATCH`, forgotten together), none past the retention.

`radium leases --all` lists leases that ended, and the pool keeps them for a week. A pool that
churns through thousands of leases a second ends as many: kept for a week, they would fill
SQLite's disk in hours, and etcd's space quota (2 GB by default; past it etcd refuses every
write, and the pool stops granting) sooner. So a store forgets the oldest as new ones end, in
the same write, and the reaper's prune forgets those past the retention; neither searches the
store for them: :class:`EndedLog` names them.

The log holds the ended leases themselves, not only their ids, so that `radium leases --all`
and `radium top --all` page through them from memory (:meth:`EndedLog.newest`): reading them
from the store held the pool's loop 250 ms a listing on etcd (10,000 ended) and 24 ms on
SQLite, and allocations waited behind it. It holds each marshalled (:data:`Frozen`): bytes,
which add nothing to the collections of the pool's heap.
"""

from __future__ import annotations

import bisect
import concurrent.futures
import itertools
import logging
import marshal
import threading
from collections import deque
from collections.abc import Callable, Iterable

from radium.configtree import PoolConfig
from radium.errors import RadiumError, UnavailableError
from radium.pool.model import Lease
from radium.pool.store import records

__all__ = ["ENDED_KEPT", "EXCESS_STEP", "FORGET_BATCH", "PRUNE_MOST", "EndedLog", "Entry", "Frozen"]

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

Entry = tuple[float, str]  # (end time, lease id): the log's order, and a listing's cursor
#: A lease as the log holds it (:func:`_frozen`): the record a store keeps of it
#: (:func:`radium.pool.store.records.lease_record`), marshalled. Bytes, which Python's collector
#: never walks: held as objects, or even as tuples (tracked until a collection first examines them),
#: 10,000 ended leases made each full collection on the pool's loop 2.5 to 3.7 ms longer
#: (in-process, after 30,000 cycles), and at 2,000 cycles/s a full collection came every 20 to 30 s.
Frozen = bytes


class EndedLog:
    """The ended leases a store holds, in the order of their entries (end time, id): read from
    the store on first use, :meth:`read` or :meth:`read_in_background`, then kept as leases
    end. An id it names is gone from it: if the write that forgets it fails, the store keeps
    that lease until the next pool reads the log afresh."""

    def __init__(
        self,
        read: Callable[[], Iterable[Lease]],
        kept: int,
        step: int = EXCESS_STEP,
        prune_most: int = PRUNE_MOST,
    ) -> None:
        self._read = read
        self.kept = kept
        self.step = step
        self.prune_most = prune_most
        self.batch = max(1, min(FORGET_BATCH, kept // 100))
        #: The entries, sorted; None until read.
        self._log: deque[Entry] | None = None
        #: The leases the entries name, by id.
        self._leases: dict[str, Frozen] = {}
        #: The read in the background, while it runs or until its result is taken.
        self.reading: concurrent.futures.Future[list[Lease]] | None = None
        #: Leases that ended while the log was being read in the background.
        self._early: list[Lease] = []

    def read(self) -> deque[Entry]:
        """Read the log from the store now: SQLite does when the pool loads its state, so its
        first ended lease does not wait for it."""
        return self._hold(self._read())

    def _hold(self, leases: Iterable[Lease]) -> deque[Entry]:
        held = {lease.id: lease for lease in leases}  # one per id: the last
        self._leases = {lease_id: _frozen(lease) for lease_id, lease in held.items()}
        self._log = deque(sorted((x.ended_at, x.id) for x in held.values()))
        return self._log

    def read_in_background(self) -> None:
        """Read the log in a thread of its own: a new etcd leader must serve first, and
        reading 10,000 ended leases takes etcd's gateway about 0.4 s. Until it is read, leases
        still end (and are noted), but none is forgotten."""
        self._log, self._early = None, []
        self._start_reading()

    def _start_reading(self) -> None:
        reading: concurrent.futures.Future[list[Lease]] = concurrent.futures.Future()

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
        # A lease that ended meanwhile may be in both: held once, by its id.
        early, self._early, self.reading = self._early, [], None
        return self._hold([*entries, *early])

    def ended(self, leases: Iterable[Lease]) -> list[str]:
        """Note leases that end now; the ids to forget with them: none until :attr:`batch` are
        beyond kept, then the oldest beyond kept, at most :attr:`step` more than end now."""
        leases = list(leases)
        log = self._held()
        if log is None:
            self._early.extend(leases)
            return []
        for lease in leases:
            if lease.id in self._leases:  # a lease ends once: held already
                continue
            entry = (lease.ended_at, lease.id)
            if log and entry < log[-1]:  # ended together in id order, or the clock stepped back
                bisect.insort(log, entry)
            else:
                log.append(entry)
            self._leases[lease.id] = _frozen(lease)
        beyond = len(log) - self.kept
        if beyond < self.batch:
            return []
        return self._oldest(log, min(beyond, len(leases) + self.step))

    def forget(self, ended_before: float) -> list[str]:
        """The ids to forget now, at most :attr:`prune_most`: beyond kept, or ended before
        ``ended_before``. A read in the background that failed starts again here (the reaper
        prunes once a minute)."""
        log = self._held(retry=True)
        if log is None:
            return []
        gone = self._oldest(log, min(len(log) - self.kept, self.prune_most))
        while log and log[0][0] < ended_before and len(gone) < self.prune_most:
            gone.extend(self._oldest(log, 1))
        return gone

    def newest(self, most: int, before: Entry | None = None) -> list[Lease]:
        """The newest ``most`` ended leases, newest first, of those whose entries come before
        ``before`` (all if None): a listing's page, and ``before`` the last entry of the page
        before it. While the log is read in the background, a clear error."""
        log = self._held()
        if log is None:
            raise UnavailableError(
                "the pool is still reading its ended leases (this replica has just taken the lead)",
                hint="list them again in a moment",
            )
        skip = 0 if before is None else len(log) - bisect.bisect_left(log, before)
        page = itertools.islice(reversed(log), skip, skip + most)
        return [_thawed(self._leases[lease_id]) for _, lease_id in page]

    def _oldest(self, log: deque[Entry], count: int) -> list[str]:
        gone = [log.popleft()[1] for _ in range(count)]
        for lease_id in gone:
            del self._leases[lease_id]
        return gone


def _frozen(lease: Lease) -> Frozen:
    return marshal.dumps(records.lease_record(lease))


def _thawed(frozen: Frozen) -> Lease:
    return records.lease_from(marshal.loads(frozen))


def _one_line(error: BaseException) -> str:
    return error.one_line() if isinstance(error, RadiumError) else repr(error)
