"""The pool's state in one SQLite file (WAL): the default store, nothing to install.

It keeps the contract of :class:`radium.pool.store.base.Store` (docs/store.md);
:mod:`radium.pool.store.etcd` is its other implementation, for pools of several replicas.
"""

from __future__ import annotations

import contextlib
import sqlite3
from typing import Iterable

from radium.errors import AlreadyExistsError, StoreUnavailableError
from radium.pool.model import (
    ACTIVE,
    AcceptorState,
    ImageStatus,
    Lease,
    Queue,
)
from radium.pool.store import sqlite_tables as tables
from radium.pool.store.checkpointer import CHECKPOINT_EVERY, WAL_SIZE_LIMIT, WalCheckpointer
from radium.pool.store.commits import Deferrable
from radium.pool.store.ended import ENDED_KEPT, EndedLog, Entry

__all__ = ["SQLiteStore"]


class SQLiteStore(Deferrable):
    """The store in one SQLite file. Each change commits before it returns, except within
    :meth:`deferring`: there changes join one open transaction, which :meth:`commit` ends (the
    pool's group commit, :mod:`radium.pool.store.commits`). The first change of such a transaction
    calls ``on_open``."""

    def __init__(
        self,
        path: str,
        synchronous: str = "normal",
        checkpoint_every: float = CHECKPOINT_EVERY,
        ended_kept: int = ENDED_KEPT,
    ) -> None:
        super().__init__()
        self._db = tables.connect(path, synchronous)
        self._closed = False
        self.ended_log = EndedLog(self._read_ended, ended_kept)
        self._checkpointer: WalCheckpointer | None = None
        if path != ":memory:":  # checkpoints off the loop (radium.pool.store.checkpointer)
            self._db.execute("PRAGMA wal_autocheckpoint = 0")
            self._db.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")
            self._checkpointer = WalCheckpointer(path, checkpoint_every)
            self._checkpointer.start()

    def _committed(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.after_commit(self._db)

    def _send_held(self) -> None:
        """Commit the transaction changes left open (nothing if none)."""
        if not self._db.in_transaction:
            return
        try:
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")
            raise StoreUnavailableError(
                f"the pool's database did not commit: {exc}",
                hint="check the disk under [pool] db; the pool stops, and its restart reloads"
                " what was committed",
            ) from exc
        self._committed()

    def _tx(self, statements: Iterable[tuple[str, tuple[object, ...]]]) -> None:
        statements = list(statements)
        if not self._db.in_transaction:
            if len(statements) == 1 and not self._deferring:
                self._db.execute(*statements[0])  # autocommit: a transaction of its own
                self._committed()
                return
            self._db.execute("BEGIN IMMEDIATE")
            if self._deferring:
                self._hold()
        try:
            if len(statements) == 1:  # one statement is atomic: a failed one undoes itself
                self._db.execute(*statements[0])
                return
            self._db.execute("SAVEPOINT change")
            try:
                for sql, params in statements:
                    self._db.execute(sql, params)
            except BaseException:
                self._db.execute("ROLLBACK TO change")
                raise
            finally:
                self._db.execute("RELEASE change")
        finally:
            if not self._deferring:
                self._commit_ahead()  # with the held changes: durable sooner is never wrong

    def load(self) -> tuple[list[AcceptorState], list[Lease]]:
        acceptors = tables.acceptors(
            self._db.execute("SELECT * FROM acceptors"),
            self._db.execute("SELECT * FROM devices ORDER BY acceptor, id"),
        )
        leases = [
            tables.lease(row)
            for row in self._db.execute("SELECT * FROM leases WHERE state = ?", (ACTIVE,))
        ]
        self.ended_log.read()
        return acceptors, leases

    def save_acceptor(self, acceptor: AcceptorState) -> None:
        self._tx(tables.acceptor_rows(acceptor))

    def set_up(self, name: str, up: bool) -> None:
        self._tx([("UPDATE acceptors SET up = ? WHERE name = ?", (int(up), name))])

    def add_lease(self, lease: Lease) -> None:
        try:
            self._tx([tables.lease_row(lease)])
        except sqlite3.IntegrityError as exc:  # the contract: a lease is added once
            raise AlreadyExistsError(f"lease {lease.id} exists already") from exc

    def end_leases(self, leases: Iterable[Lease]) -> None:
        leases = list(leases)
        self._tx(
            [
                *(
                    (
                        "UPDATE leases SET state = ?, ended_at = ? WHERE id = ?",
                        (lease.state, lease.ended_at, lease.id),
                    )
                    for lease in leases
                ),
                *tables.forgetting(self.ended_log.ended(leases)),
            ]
        )

    def _read_ended(self) -> list[Lease]:
        rows = self._db.execute("SELECT * FROM leases WHERE state != ?", (ACTIVE,))
        return [tables.lease(row) for row in rows]

    def extend_active(self, expires_at: float) -> None:
        self._tx(
            [
                (
                    "UPDATE leases SET expires_at = MAX(expires_at, ?)"
                    " WHERE state = ? AND preempted_at = 0",
                    (expires_at, ACTIVE),
                )
            ]
        )

    def mark_preempted(self, leases: Iterable[Lease]) -> None:
        self._tx(
            [
                (
                    "UPDATE leases SET preempted_at = ?, preempted_for = ?, expires_at = ?"
                    " WHERE id = ?",
                    (lease.preempted_at, lease.preempted_for, lease.expires_at, lease.id),
                )
                for lease in leases
            ]
        )

    def load_queues(self) -> list[Queue]:
        return [
            Queue(
                row["name"],
                row["deserved"],
                row["weight"],
                row["limit"],
                row["priority"],
                row["parent"],
            )
            for row in self._db.execute("SELECT * FROM queues ORDER BY name")
        ]

    def save_queue(self, queue: Queue) -> None:
        self._tx(
            [
                (
                    "INSERT OR REPLACE INTO queues VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        queue.name,
                        queue.deserved,
                        queue.weight,
                        queue.limit,
                        queue.priority,
                        queue.parent,
                    ),
                )
            ]
        )

    def drop_queue(self, name: str) -> None:
        self._tx([("DELETE FROM queues WHERE name = ?", (name,))])

    def ended_leases(self, limit: int, before: Entry | None = None) -> list[Lease]:
        return self.ended_log.newest(limit, before)

    def prune(self, ended_before: float) -> int:
        """Forget leases that ended before this time, and beyond the newest kept; how many."""
        gone = self.ended_log.forget(ended_before)
        if gone:
            self._tx(tables.forgetting(gone))
        return len(gone)

    def load_images(self) -> tuple[list[str], list[ImageStatus]]:
        refs = [row["ref"] for row in self._db.execute("SELECT ref FROM images ORDER BY ref")]
        statuses = [
            ImageStatus(
                row["ref"],
                row["acceptor"],
                row["state"],
                row["progress"],
                row["digest"],
                row["error"],
            )
            for row in self._db.execute("SELECT * FROM image_status")
        ]
        return refs, statuses

    def save_image(self, ref: str, now: float) -> None:
        self._tx([("INSERT OR REPLACE INTO images VALUES (?, ?)", (ref, now))])

    def drop_image(self, ref: str) -> None:
        self._tx([("DELETE FROM images WHERE ref = ?", (ref,))])

    def save_image_status(self, status: ImageStatus) -> None:
        self._tx(
            [
                (
                    "INSERT OR REPLACE INTO image_status VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        status.ref,
                        status.acceptor,
                        status.state,
                        status.progress,
                        status.digest,
                        status.error,
                    ),
                )
            ]
        )

    def drop_image_status(self, ref: str, acceptor: str) -> None:
        self._tx([("DELETE FROM image_status WHERE ref = ? AND acceptor = ?", (ref, acceptor))])

    def close(self) -> None:
        """Commit what is held and close; closing again does nothing, as a file's close."""
        if self._closed:
            return
        self._closed = True
        try:
            self.commit()  # changes whose answers wait for it: earlier is never wrong
        finally:
            if self._checkpointer is not None:
                self._checkpointer.stop()
            self._db.close()  # the last connection: SQLite checkpoints and removes the WAL
