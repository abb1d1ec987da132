"""The node agent's start undoes what it made when a later step fails (issue 38): nothing of
it is left for the next agent to trip over."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from radium import agentprotocol
from radium.agent.process import serve
from radium.configtree import AgentConfig, Config


def test_a_start_socket_it_cannot_make_leaves_no_control_socket_behind(tmp_path: Path) -> None:
    state = tmp_path / "agent"
    state.mkdir(mode=0o700)
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    socket = run / "agent.sock"
    # The start socket's path is a directory with something in it: it cannot be replaced.
    blocked = Path(agentprotocol.start_socket(str(socket)))
    blocked.mkdir()
    (blocked / "keep").write_text("x")
    agent = AgentConfig(state_file=str(state / "state.json"), socket=str(socket), metrics="")
    with pytest.raises(OSError):
        asyncio.run(serve(Config(agent=agent)))
    # The control socket it had made is gone again (the next agent would find a dead one).
    assert not socket.exists()
    assert sorted(p.name for p in run.iterdir()) == [blocked.name]
