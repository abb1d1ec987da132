"""SQLite's WAL checkpoints run off the pool's loop (radium.pool.store.checkpointer): commits never
checkpoint, and the checkpointer thread moves them into the database file."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from radium.pool.store.sqlite import SQLiteStore
from tests.pool.test_store_contract import lease


def rows_in_the_file(db: Path) -> int:
    """Leases in the database file itself, ignoring the WAL (what a checkpoint has moved)."""
    file = sqlite3.connect(f"file:{db}?immutable=1", uri=True)
    try:
        return int(file.execute("SELECT count(*) FROM leases").fetchone()[0])
    except sqlite3.OperationalError:  # not even the schema has reached the file
        return 0
    finally:
        file.close()


def add(store: SQLiteStore, count: int, first: int = 0) -> None:
    for n in range(first, first + count):
        store.add_lease(lease(f"l-{n}"))


def test_commits_stay_in_the_wal_until_the_checkpointer_moves_them(tmp_path: Path) -> None:
    db = tmp_path / "pool.db"
    store = SQLiteStore(str(db), checkpoint_every=3600)  # it will not run in this test
    add(store, 2000)  # far past SQLite's own 1,000-page checkpoint
    assert rows_in_the_file(db) == 0, "a commit checkpointed on the caller's thread"
    store.close()  # the last connection checkpoints
    assert rows_in_the_file(db) == 2000


def test_the_checkpointer_moves_commits_into_the_file(tmp_path: Path) -> None:
    db = tmp_path / "pool.db"
    store = SQLiteStore(str(db), checkpoint_every=0.05)
    add(store, 300)
    checkpointer = store._checkpointer
    assert checkpointer is not None
    began = checkpointer.done
    deadline = time.monotonic() + 10
    while checkpointer.done < began + 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert rows_in_the_file(db) == 300
    add(store, 1, first=300)  # the store writes on after checkpoints
    store.close()
    assert rows_in_the_file(db) == 301


def frames_in_the_wal(db: Path) -> int:
    """The WAL's length in frames (a PASSIVE checkpoint reports it; nothing is left to copy)."""
    other = sqlite3.connect(db, isolation_level=None)
    try:
        return int(other.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1])
    finally:
        other.close()


def test_the_wal_starts_again_while_commits_never_pause(tmp_path: Path) -> None:
    """Every commit lands while the checkpointer copies: without the writer copying the rest
    between two transactions (after_commit), no transaction would ever begin with the WAL all
    copied, and the WAL would grow by every commit."""
    db = tmp_path / "pool.db"
    store = SQLiteStore(str(db), checkpoint_every=0.005)
    checkpointer = store._checkpointer
    assert checkpointer is not None
    commits = 0
    deadline = time.monotonic() + 30
    while checkpointer.done < 20 and time.monotonic() < deadline:
        add(store, 20, first=commits)
        commits += 20
    assert checkpointer.done >= 20, "the checkpointer did not run"
    frames = frames_in_the_wal(db)
    store.close()
    assert frames < commits / 4, f"{frames} frames in the WAL after {commits} commits"
    assert rows_in_the_file(db) == commits
