"""The poststop stage: forget a container. Light on imports, it runs as every container ends."""

from __future__ import annotations

import logging
import os
import shutil

# Not typing.TYPE_CHECKING: importing typing costs milliseconds on every container start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from radium.config import Config
    from radium.hooks.state import State

__all__ = ["poststop", "release", "runtime_dir"]

log = logging.getLogger(__name__)


def runtime_dir(config: Config, container_id: str) -> str:
    """The host directory the hook keeps for one container (mounted at hook.runtime_target)."""
    return os.path.join(config.hook.state_dir, container_id)


def release(state: State, config: Config) -> None:
    """Give the container's lease back through the agent; if that fails the TTL reclaims it."""
    from radium import agentclient
    from radium.errors import RadiumError

    try:
        agentclient.release(config, state.container_id)
    except RadiumError as exc:
        log.warning("container %s: releasing its lease: %s", state.container_id, exc.one_line())


def poststop(state: State, config: Config) -> None:
    """Release the lease and remove the runtime directory; safe to run any number of times."""
    if config.agent.enabled:
        release(state, config)
    host_dir = runtime_dir(config, state.container_id)
    shutil.rmtree(host_dir, ignore_errors=True)
    log.info("container %s: cleaned up %s", state.container_id, host_dir)
