"""Registered images in the pool: per-acceptor states, followers woken, kept across restarts."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from radium.errors import InvalidRequestError
from radium.pool.core.images import DONE_ADDING, GONE, Images, check_ref
from radium.pool.model import ImageStatus
from tests.pool.conftest import OpenSQLite, OpenStore


def test_add_report_follow_and_persist(open_store: OpenStore) -> None:
    async def scenario() -> list[list[str]]:
        images = Images(open_store("pool"))
        images.add("reg/img:1", ["a", "b"], now=1.0)
        seen: list[list[str]] = []

        async def follow() -> None:
            async for rows in images.follow("reg/img:1", ["a", "b"], DONE_ADDING, timeout=10):
                seen.append([r.state for r in rows])

        task = asyncio.create_task(follow())
        await asyncio.sleep(0)
        images.report(ImageStatus("reg/img:1", "a", "pulling", 0.5))
        await asyncio.sleep(0)
        images.report(ImageStatus("reg/img:1", "a", "ready", 1.0, "sha256:x"))
        await asyncio.sleep(0)
        images.report(ImageStatus("reg/img:1", "b", "failed", error="manifest unknown"))
        await asyncio.wait_for(task, 5)
        return seen

    seen = asyncio.run(scenario())
    assert seen[0] == ["pending", "pending"]
    assert seen[-1] == ["ready", "failed"]
    reopened = Images(open_store("pool"))  # a pool restart
    assert reopened.refs == {"reg/img:1"}
    assert reopened.ready_on("a") == {"reg/img:1"}
    assert reopened.missing_on("b") == ["reg/img:1"]
    assert reopened.missing_on("new-acceptor") == ["reg/img:1"]
    reopened.remove("reg/img:1", ["a"])
    assert reopened.status[("reg/img:1", "a")].state == "removing"
    reopened.report(ImageStatus("reg/img:1", "a", "removed"))
    assert ("reg/img:1", "a") not in reopened.status
    with pytest.raises(InvalidRequestError, match="not registered"):
        reopened.remove("reg/img:1", [])


@pytest.mark.parametrize("ref", ["", "a b", "x" * 600])
def test_bad_refs(ref: str) -> None:
    with pytest.raises(InvalidRequestError):
        check_ref(ref)


def test_a_database_from_before_images_gains_the_new_columns(
    tmp_path: Path, sqlite_store: OpenSQLite
) -> None:
    db = tmp_path / "old.db"
    old = sqlite3.connect(db)
    old.execute(
        "CREATE TABLE leases (id TEXT PRIMARY KEY, acceptor TEXT NOT NULL, data_address TEXT NOT"
        " NULL, devices TEXT NOT NULL, fraction REAL NOT NULL, holder TEXT NOT NULL, queue TEXT"
        " NOT NULL, credential TEXT NOT NULL, ttl REAL NOT NULL, expires_at REAL NOT NULL,"
        " created_at REAL NOT NULL, state TEXT NOT NULL, ended_at REAL NOT NULL)"
    )
    old.execute(
        "INSERT INTO leases VALUES ('l-1', 'a', 'h:1', '{\"cpu0\": 1}', 1, 'h', '', 'c', 30, 9e9,"
        " 0, 'active', 0)"
    )
    old.commit()
    old.close()
    _, leases = sqlite_store(db).load()
    assert [(le.id, le.image, le.worker) for le in leases] == [("l-1", "", "")]


def test_an_acceptor_that_goes_away_counts_as_failed_for_followers(
    tmp_path: Path, sqlite_store: OpenSQLite
) -> None:
    async def scenario() -> list[tuple[str, str]]:
        images = Images(sqlite_store(tmp_path / "pool.db"))
        images.add("reg/img:1", ["a", "b"], now=1.0)
        up = {"a": True, "b": True}
        rows: list[ImageStatus] = []

        async def follow() -> None:
            async for update in images.follow(
                "reg/img:1", ["a", "b"], DONE_ADDING, 10, lambda name: up[name]
            ):
                rows[:] = update

        task = asyncio.create_task(follow())
        await asyncio.sleep(0)
        images.report(ImageStatus("reg/img:1", "a", "ready", 1.0, "sha256:x"))
        up["b"] = False
        images.poke()
        await asyncio.wait_for(task, 5)
        return [(r.state, r.error) for r in rows]

    assert asyncio.run(scenario()) == [("ready", ""), ("failed", GONE)]
