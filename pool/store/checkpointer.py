"""SQLite's WAL checkpoints, moved off the pool's event loop.

By default SQLite checkpoints inside the commit that takes the write-ahead log past 1,000 pages:
that commit copies the log into the database and syncs both files, on the pool's loop, while
every lease call waits behind it. At 2,000 allocate+release cycles a second that was a stall
every few dozen cycles: with it, 100 clients paced to 2,000/s saw p50 35 ms and p99 71 ms;
without it, p50 7 ms and p99 28 ms (benchmarks/pool.py's paced level, this 2-core machine).

So the pool's connection never checkpoints (``wal_autocheckpoint = 0``), and this thread runs a
PASSIVE checkpoint on a connection of its own every ``every`` seconds. A PASSIVE checkpoint
takes no lock a writer needs, so commits go on during it; the sqlite3 module releases the GIL
while SQLite works, so the loop does too. Durability is unchanged: a commit is in the WAL before
it is answered, and a restart replays the WAL.

The WAL starts again from its beginning only when a write transaction begins with every frame
already in the database file. Under steady load the pool commits while the thread checkpoints,
so that moment never came: the WAL grew without end (about 28 MB a second at 2,000 cycles a
second), every commit extended the file, and the loop's turns took 10 to 20 ms around each
checkpoint (measured; the file system's journal is the likely cause). So the thread copies the
bulk and then
leaves the rest to the pool's connection (:meth:`WalCheckpointer.after_commit`): the few frames
committed meanwhile, copied between two of its transactions, and its next transaction starts
the WAL again. The WAL stays as large as one interval's commits."""

from __future__ import annotations

import logging
import sqlite3
import threading

__all__ = ["CHECKPOINT_EVERY", "WAL_SIZE_LIMIT", "WalCheckpointer"]

log = logging.getLogger(__name__)
#: Seconds between checkpoints of a running pool.
CHECKPOINT_EVERY = 1.0
#: Set on the pool's connection, which starts the WAL again: the file is cut back to this size
#: then (SQLite applies the writer's limit, not the checkpointer's).
WAL_SIZE_LIMIT = 64 << 20


class WalCheckpointer:
    """Checkpoints the database at ``path`` every ``every`` seconds until :meth:`stop`; the
    writer calls :meth:`after_commit` after each of its commits."""

    def __init__(self, path: str, every: float = CHECKPOINT_EVERY) -> None:
        self._path = path
        self._every = every
        #: A pass has copied the bulk: the writer's next commit copies the rest (set on the
        #: thread, read by the writer; assigning a bool is atomic).
        self._tail_due = False
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wal-checkpoint", daemon=True)
        #: Checkpoints done so far (tests wait on it).
        self.done = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join()

    def after_commit(self, db: sqlite3.Connection) -> None:
        """On the writer's connection ``db``, between two of its transactions: copy what was
        committed during the last pass, so that its next transaction starts the WAL again."""
        if not self._tail_due:
            return
        self._tail_due = False
        _checkpoint(db, "the pool database's last commits")  # a failure only leaves the WAL longer

    def _run(self) -> None:
        db = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        try:
            while not self._stopping.wait(self._every):
                # A failed one is retried at the next; commits go on meanwhile.
                if _checkpoint(db, "the pool database"):
                    self.done += 1
                    self._tail_due = True
        finally:
            db.close()


def _checkpoint(db: sqlite3.Connection, what: str) -> bool:
    """A PASSIVE checkpoint on ``db``; False (logged) if it failed."""
    try:
        db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
    except sqlite3.Error as exc:
        log.warning("checkpointing %s failed: %s", what, exc)
        return False
    return True
