"""The hook's poststop: forget a container. Light on imports, it runs as every container ends."""

from __future__ import annotations

import logging
import os
import shutil

# Not typing.TYPE_CHECKING: importing typing costs milliseconds on every container start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from radium.configtree import Config
    from radium.hooks.state import State

__all__ = ["forget", "poststop", "release", "runtime_dir"]

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


def runtime_dir(config: Config, container_id: str) -> str:
    """The host directory the hook keeps for one container (mounted at hook.runtime_target)."""
    return os.path.join(config.hook.state_dir, container_id)


def forget(config: Config, container_id: str, why: str) -> None:
    """The container's runtime directory removed, after its lease was given back (by the hook
    or the node agent); safe to run any number of times."""
    host_dir = runtime_dir(config, container_id)
    shutil.rmtree(host_dir, ignore_errors=True)
    log.info("container %s: cleaned up %s (%s)", container_id, host_dir, why)


def poststop(state: State, config: Config) -> None:
    """The lease given back, then the container forgotten."""
    release(state, config)
    forget(config, state.container_id, "poststop")
