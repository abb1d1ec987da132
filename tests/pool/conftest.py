"""The store a pool test runs on: each store test runs once on SQLite and once on a real etcd."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from radium.pool.store.base import Store
from radium.pool.store.etcd import EtcdStore
from radium.pool.store.etcd_kv import EtcdKV
from radium.pool.store.sqlite import SQLiteStore
from tests.etcd_server import EtcdCluster, single

#: Opens the store called ``name`` (the same state each time: a pool restart), at time 0,
#: with the store's keyword options (``ended_kept``).
OpenStore = Callable[..., Store]


@pytest.fixture(scope="session")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    cluster = single(tmp_path_factory.mktemp("etcd"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


#: Opens a SQLite store at a path, with the store's keyword options.
OpenSQLite = Callable[..., SQLiteStore]


@pytest.fixture
def sqlite_store() -> Iterator[OpenSQLite]:
    """Opens SQLite stores, and closes them after the test: each runs a checkpoint thread."""
    opened: list[SQLiteStore] = []

    def open_sqlite(path: Path, **options: Any) -> SQLiteStore:
        opened.append(SQLiteStore(str(path), **options))
        return opened[-1]

    try:
        yield open_sqlite
    finally:
        for store in opened:
            store.close()


@pytest.fixture(params=["sqlite", "etcd"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OpenStore]:
    if request.param == "sqlite":
        sqlite: OpenSQLite = request.getfixturevalue("sqlite_store")

        def open_sqlite(name: str = "pool", **options: Any) -> Store:
            return sqlite(tmp_path / f"{name}.db", **options)

        yield open_sqlite
        return
    cluster: EtcdCluster = request.getfixturevalue("etcd")
    kv = EtcdKV(cluster.endpoints)
    prefix = f"/test-{uuid.uuid4().hex}/"  # each test its own empty pool

    def open_etcd(name: str = "pool", **options: Any) -> Store:
        return EtcdStore(kv, f"{prefix}{name}/", **options)

    try:
        yield open_etcd
    finally:
        kv.close()


def loaded(store: Store) -> Store:
    """``store`` once it has loaded and read its ended leases (etcd reads them beside serving,
    and a listing is served from what it read)."""
    store.load()
    if (reading := store.ended_log.reading) is not None:
        reading.result(timeout=10)
    return store
