"""The pool's SQLite tables: their schema, its additions since the first release, how a row
becomes a lease or an acceptor and how they become rows. :mod:`radium.pool.store.sqlite` reads
and writes through them."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable

from radium.pool.model import DEFAULT_PRIORITY, AcceptorState, Device, DeviceState, Lease

__all__ = [
    "FORGET_CHUNK",
    "Statement",
    "acceptor_rows",
    "acceptors",
    "connect",
    "forgetting",
    "lease",
    "lease_row",
]

#: One SQL statement and its parameters.
Statement = tuple[str, tuple[object, ...]]
#: Ids forgotten by one statement, at most (SQLite takes 999 parameters before 3.32).
FORGET_CHUNK = 500

_SCHEMA = """
CREATE TABLE IF NOT EXISTS acceptors (
    name TEXT PRIMARY KEY,
    data_address TEXT NOT NULL,
    labels TEXT NOT NULL,
    up INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS devices (
    acceptor TEXT NOT NULL,
    id TEXT NOT NULL,
    vendor TEXT NOT NULL,
    model TEXT NOT NULL,
    memory_mib INTEGER NOT NULL,
    labels TEXT NOT NULL,
    PRIMARY KEY (acceptor, id)
);
CREATE TABLE IF NOT EXISTS leases (
    id TEXT PRIMARY KEY,
    acceptor TEXT NOT NULL,
    data_address TEXT NOT NULL,
    devices TEXT NOT NULL,
    fraction REAL NOT NULL,
    holder TEXT NOT NULL,
    queue TEXT NOT NULL,
    credential TEXT NOT NULL,
    ttl REAL NOT NULL,
    expires_at REAL NOT NULL,
    created_at REAL NOT NULL,
    state TEXT NOT NULL,
    ended_at REAL NOT NULL
);
-- The index on (state, ended_at) is gone. Each lease's end moved its entry: a third of the
-- WAL's pages (7.5 against 5.1 per commit of 3 cycles). Its use was small: the active leases,
-- read once at start, take 20 ms with or without it beside 10,000 ended ones, and the ended
-- leases' query (state != active) could not use it.
DROP INDEX IF EXISTS leases_by_state;
CREATE TABLE IF NOT EXISTS queues (
    name TEXT PRIMARY KEY,
    deserved REAL NOT NULL,
    weight REAL NOT NULL,
    "limit" REAL NOT NULL,
    priority INTEGER NOT NULL,
    parent TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS images (
    ref TEXT PRIMARY KEY,
    added_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS image_status (
    ref TEXT NOT NULL,
    acceptor TEXT NOT NULL,
    state TEXT NOT NULL,
    progress REAL NOT NULL,
    digest TEXT NOT NULL,
    error TEXT NOT NULL,
    PRIMARY KEY (ref, acceptor)
);
"""
#: Columns added after the first release: (table, column, definition).
_ADDED_COLUMNS = (
    ("leases", "image", "TEXT NOT NULL DEFAULT ''"),
    ("leases", "worker", "TEXT NOT NULL DEFAULT ''"),
    ("leases", "cpu_milli", "INTEGER NOT NULL DEFAULT 0"),
    ("leases", "priority", f"TEXT NOT NULL DEFAULT '{DEFAULT_PRIORITY}'"),
    ("leases", "preempted_at", "REAL NOT NULL DEFAULT 0"),
    ("leases", "preempted_for", "TEXT NOT NULL DEFAULT ''"),
    ("acceptors", "cpu_milli", "INTEGER NOT NULL DEFAULT 0"),
)


def connect(path: str, synchronous: str = "normal") -> sqlite3.Connection:
    """The database at ``path`` (made private), in WAL mode, with every table and column."""
    if path != ":memory:":
        os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o700, exist_ok=True)
        _private(path)
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.row_factory = sqlite3.Row
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA synchronous={'FULL' if synchronous == 'full' else 'NORMAL'}")
    db.executescript(_SCHEMA)
    for table, column, definition in _ADDED_COLUMNS:
        columns = {row["name"] for row in db.execute(f"PRAGMA table_info({table})")}
        if column not in columns:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")
    return db


def lease(row: sqlite3.Row) -> Lease:
    """The lease of a row."""
    return Lease(
        id=row["id"],
        acceptor=row["acceptor"],
        data_address=row["data_address"],
        devices=json.loads(row["devices"]),
        fraction=row["fraction"],
        holder=row["holder"],
        queue=row["queue"],
        credential=row["credential"],
        ttl=row["ttl"],
        expires_at=row["expires_at"],
        created_at=row["created_at"],
        state=row["state"],
        ended_at=row["ended_at"],
        image=row["image"],
        worker=row["worker"],
        cpu_milli=row["cpu_milli"],
        priority=row["priority"],
        preempted_at=row["preempted_at"],
        preempted_for=row["preempted_for"],
    )


def acceptors(
    rows: Iterable[sqlite3.Row], device_rows: Iterable[sqlite3.Row]
) -> list[AcceptorState]:
    """The acceptors of their rows, each with its devices (not registered: a restarted pool
    gives an acceptor nothing until it registers again)."""
    found = {
        row["name"]: AcceptorState(
            row["name"],
            row["data_address"],
            json.loads(row["labels"]),
            {},
            bool(row["up"]),
            cpu_milli=row["cpu_milli"],
            registered=False,
        )
        for row in rows
    }
    for row in device_rows:
        device = Device(
            row["id"], row["vendor"], row["model"], row["memory_mib"], json.loads(row["labels"])
        )
        if row["acceptor"] in found:
            found[row["acceptor"]].devices[device.id] = DeviceState(device)
    return list(found.values())


def acceptor_rows(acceptor: AcceptorState) -> list[Statement]:
    """The statements that replace the acceptor and its device list."""
    statements: list[Statement] = [
        (
            "INSERT OR REPLACE INTO acceptors (name, data_address, labels, up, cpu_milli)"
            " VALUES (?, ?, ?, ?, ?)",
            (
                acceptor.name,
                acceptor.data_address,
                json.dumps(dict(acceptor.labels)),
                int(acceptor.up),
                acceptor.cpu_milli,
            ),
        ),
        ("DELETE FROM devices WHERE acceptor = ?", (acceptor.name,)),
    ]
    for state in acceptor.devices.values():
        d = state.device
        statements.append(
            (
                "INSERT INTO devices VALUES (?, ?, ?, ?, ?, ?)",
                (
                    acceptor.name,
                    d.id,
                    d.vendor,
                    d.model,
                    d.memory_mib,
                    json.dumps(dict(d.labels)),
                ),
            )
        )
    return statements


def lease_row(lease: Lease) -> Statement:
    """The statement that adds the lease."""
    return (
        "INSERT INTO leases (id, acceptor, data_address, devices, fraction, holder,"
        " queue, credential, ttl, expires_at, created_at, state, ended_at, image,"
        " worker, cpu_milli, priority, preempted_at, preempted_for)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            lease.id,
            lease.acceptor,
            lease.data_address,
            json.dumps(lease.devices),
            lease.fraction,
            lease.holder,
            lease.queue,
            lease.credential,
            lease.ttl,
            lease.expires_at,
            lease.created_at,
            lease.state,
            lease.ended_at,
            lease.image,
            lease.worker,
            lease.cpu_milli,
            lease.priority,
            lease.preempted_at,
            lease.preempted_for,
        ),
    )


def forgetting(ids: list[str]) -> list[Statement]:
    """One statement per :data:`FORGET_CHUNK` ids (within SQLite's limit on parameters)."""
    chunks = [tuple(ids[n : n + FORGET_CHUNK]) for n in range(0, len(ids), FORGET_CHUNK)]
    return [
        (f"DELETE FROM leases WHERE id IN ({', '.join('?' * len(chunk))})", chunk)
        for chunk in chunks
    ]


def _private(path: str) -> None:
    """The database holds every lease's credential: 0600, and so its WAL files (SQLite gives
    them the database's mode). An older, wider database is narrowed."""
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    for name in (path, f"{path}-wal", f"{path}-shm"):
        if os.path.exists(name):
            os.chmod(name, 0o600)
