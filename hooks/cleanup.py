"""The hook's poststop: forget a container. Light on imports, it runs as every container ends."""

from __future__ import annotations

import logging

from radium.hooks import stages

# Not typing.TYPE_CHECKING: importing typing costs milliseconds on every container start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from radium.configtree import Config
    from radium.hooks.state import State

__all__ = ["poststop", "release"]

log = logging.getLogger(__name__)


def release(state: State, config: Config) -> None:
    """Give the container's lease back through the agent; if that fails the TTL reclaims it."""
    if not config.agent.enabled:
        return
    from radium import agentclient
    from radium.errors import RadiumError

    try:
        agentclient.release(config, state.container_id)
    except RadiumError as exc:
        log.warning("container %s: releasing its lease: %s", state.container_id, exc.one_line())


def poststop(state: State, config: Config) -> None:
    """:func:`radium.hooks.stages.poststop`'s steps, done in this process."""

    def do(step: stages.Step) -> bool:
        release(state, config)  # its one step
        return False

    stages.run(stages.poststop(config, state.container_id, "poststop"), do)
