"""The node agent's state directory (issue 34): lease credentials live there, so the agent
refuses one another local user could read or replace, before it opens anything in it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from radium.agent.process import serve
from radium.configtree import AgentConfig, Config
from radium.errors import UnsafeStateDirError


def test_the_agent_refuses_a_state_directory_others_may_write(tmp_path: Path) -> None:
    state = tmp_path / "agent"
    state.mkdir()
    state.chmod(0o777)
    agent = AgentConfig(state_file=str(state / "state.json"), socket=str(state / "agent.sock"))
    with pytest.raises(UnsafeStateDirError) as refused:
        asyncio.run(serve(Config(agent=agent)))
    assert refused.value.one_line() == (
        f"state directory {state} is writable by other users (mode 0777); "
        "remove it or choose another [agent] state_file"
    )
    assert list(state.iterdir()) == []  # no lock, no socket, no state
