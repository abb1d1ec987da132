"""Queues fixed by the config file: checked as one tree with the stored ones, and stored."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from radium.configtree import QueueConfig
from radium.errors import ConfigError
from radium.pool.api.server import configure_queues
from radium.pool.core.state import PoolState
from radium.pool.model import Queue
from tests.pool.conftest import OpenSQLite

StateAt = Callable[[Path], PoolState]


@pytest.fixture
def state_at(sqlite_store: OpenSQLite) -> StateAt:
    """Opens the pool's state in a SQLite file (again: a restart)."""
    return lambda db: PoolState(sqlite_store(db), lease_ttl=1000, heartbeat_timeout=1000, now=0)


def test_config_queues_override_stored_ones_and_survive_a_restart(
    tmp_path: Path, state_at: StateAt
) -> None:
    db = tmp_path / "pool.db"
    state = state_at(db)
    state.store.save_queue(Queue("org", deserved=4))
    state.store.save_queue(Queue("team", deserved=1, parent="org"))
    state = state_at(db)
    configure_queues(
        state, {"team": QueueConfig(deserved=3, parent="org"), "web": QueueConfig(limit=2)}
    )
    expected = {
        "org": Queue("org", deserved=4),
        "team": Queue("team", deserved=3, parent="org"),
        "web": Queue("web", limit=2),
    }
    assert state.queues.by_name == expected
    assert state_at(db).queues.by_name == expected


@pytest.mark.parametrize(
    ("configured", "message"),
    [
        ({"t": QueueConfig(parent="nowhere")}, "pool.queues.t: no parent queue 'nowhere'"),
        ({"t": QueueConfig(deserved=3, limit=2)}, "cannot deserve 3 GPUs with a limit of 2"),
        ({"bad name": QueueConfig()}, "pool.queues.bad name: queue name 'bad name' must be"),
        ({"t": QueueConfig(weight=-1)}, "queue weight must be a number of GPUs >= 0"),
    ],
)
def test_a_bad_config_queue_is_refused_and_nothing_is_stored(
    tmp_path: Path, state_at: StateAt, configured: dict[str, QueueConfig], message: str
) -> None:
    state = state_at(tmp_path / "pool.db")
    with pytest.raises(ConfigError, match=message):
        configure_queues(state, configured)
    assert state.queues.by_name == {}
    assert state_at(tmp_path / "pool.db").queues.by_name == {}
