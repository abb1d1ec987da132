"""The start socket: a Radium container's start, done by the resident agent.

Without it, a leased container starts three Python programs (the wrapper's create, the prestart
and the poststop hook), each paying 100 ms of interpreter and imports. With it, each of those
steps is one round trip of ``radium-agent-call`` (docs/agent-agentprotocol.md, section 2) and the
agent, with everything already imported, edits the spec, takes the lease and has its mount
helper mount the bundle.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from typing import Mapping, Protocol, Sequence

from radium import agentprotocol, ocispec
from radium.agent.service import AgentService
from radium.configtree import Config
from radium.errors import InvalidRequestError, RadiumError
from radium.hooks import cleanup, stages
from radium.hooks.state import parse_state, valid_container_id
from radium.shim import specedit

__all__ = ["BundleMounter", "ConfigSource", "StartService"]

log = logging.getLogger(__name__)


class BundleMounter(Protocol):
    """Mounts a container's bundle (in the agent: its mount helper process)."""

    async def mount_bundle(self, state: bytes, runtime_dir: str) -> None: ...


class ConfigSource:
    """The config file the agent loaded, and whether it still is what the agent loaded."""

    def __init__(self, path: str) -> None:
        self.path = os.path.abspath(path)
        self._seen = self._signature()

    def _signature(self) -> tuple[int, int, int] | None:
        try:
            info = os.stat(self.path)
        except OSError:
            return None
        return (info.st_ino, info.st_size, info.st_mtime_ns)

    def is_current(self, path: str) -> bool:
        """Whether ``path`` is this config file, unchanged since the agent loaded it."""
        if path != self.path:
            return False
        if self._signature() != self._seen:
            log.warning("%s changed since the agent started: restart it to use it", self.path)
            return False
        return True


class StartService:
    """Answers the start socket. ``agent_hook`` is the thin hook command it puts in specs."""

    def __init__(
        self,
        config: Config,
        source: ConfigSource,
        agent: AgentService,
        mounter: BundleMounter,
        agent_hook: Sequence[str],
        environ: Mapping[str, str],
    ) -> None:
        self.config, self.source, self.agent, self.mounter = config, source, agent, mounter
        self.agent_hook, self.environ = tuple(agent_hook), dict(environ)

    def _mine(self, config_path: str) -> bool:
        """Whether a create or delete under ``config_path`` is this agent's to do."""
        runtime = self.config.runtime
        return (
            self.config.agent.enabled
            and not runtime.hook_command  # the user's own hook: only the full path runs it
            and self.source.is_current(config_path)
        )

    async def create(self, config_path: str, bundle: str) -> bytes:
        """Add the agent's hooks (falling back to radium-hook) to a Radium container's spec."""
        if not self._mine(config_path):
            return agentprotocol.REPLY_PASS
        if not os.path.isabs(bundle):
            raise InvalidRequestError(f"create takes an absolute bundle path, not {bundle!r}")
        bundle = os.path.normpath(bundle)  # the native client joins, but does not normalise
        spec = ocispec.read(bundle)
        # Only what the user asked: the image's own ENV/annotations are dropped (issue 34); a
        # pod's sandbox asks nothing (radium.shim.pods).
        request = specedit.logged_request(bundle, spec)
        if request is not None:
            specedit.add_radium(bundle, spec, request, self.config, self.environ, self.agent_hook)
        return agentprotocol.REPLY_OK

    async def prestart(self, raw_state: bytes) -> bytes:
        """Take the container's lease and mount its bundle; nothing is kept when either fails."""
        state = parse_state(raw_state)
        if not state.wants_radium:
            return agentprotocol.REPLY_OK

        async def do(step: stages.Step) -> bool:
            if isinstance(step, stages.Lease):
                request = {
                    "container": state.container_id,
                    "pid": state.pid,
                    "request": state.radium_annotations,
                    "runtime_dir": step.host_dir,
                }
                return (await self.agent.acquire(request)).get("lease") is not None
            if isinstance(step, stages.Mount):
                await self.mounter.mount_bundle(raw_state, step.host_dir)
            else:
                await self.agent.release(state.container_id, step.why)
            return False

        await stages.run_async(stages.prestart(state, self.config), do)
        log.info("container %s: started through the agent", state.container_id)
        return agentprotocol.REPLY_OK

    async def poststop(self, raw_state: bytes) -> bytes:
        state = parse_state(raw_state)
        if state.wants_radium:
            await self._forget(state.container_id, "poststop")
        return agentprotocol.REPLY_OK

    async def delete(self, config_path: str, container_id: str) -> bytes:
        if not self._mine(config_path):
            return agentprotocol.REPLY_PASS
        if not valid_container_id(container_id):
            raise InvalidRequestError(f"invalid container id {container_id!r}")
        await self._forget(container_id, "deleted")
        return agentprotocol.REPLY_OK

    async def _forget(self, container_id: str, why: str) -> None:
        """Give the lease back and remove the runtime directory; idempotent."""
        await self.agent.release(container_id, why)
        cleanup.forget(self.config, container_id, why)

    async def handle(self, request: bytes) -> bytes:
        op, _, rest = request.partition(agentprotocol.FIELD_SEPARATOR)
        name = op.decode(errors="replace")
        if name in (agentprotocol.PRESTART, agentprotocol.POSTSTOP):
            stage = self.prestart if name == agentprotocol.PRESTART else self.poststop
            return await stage(rest)
        if name in (agentprotocol.CREATE, agentprotocol.DELETE):
            fields = [os.fsdecode(f) for f in rest.split(agentprotocol.FIELD_SEPARATOR)]
            if len(fields) != 2 or not fields[1]:
                raise InvalidRequestError(f"{name} takes a config path and one argument")
            action = self.create if name == agentprotocol.CREATE else self.delete
            return await action(fields[0], fields[1])
        raise InvalidRequestError(f"unknown start operation {name!r}")

    async def serve_client(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            request = await asyncio.wait_for(_read(reader), timeout=agentprotocol.REQUEST_TIMEOUT)
            reply = await self.handle(request)
        except RadiumError as exc:
            log.warning("start request failed: %s", exc.one_line())
            reply = _error(exc.one_line())
        except (asyncio.TimeoutError, ConnectionError) as exc:
            log.warning("start request unreadable: %s", type(exc).__name__)
            reply = _error(agentprotocol.bad_request_line(exc))
        except Exception as exc:  # never leave a caller (a container's start) waiting
            log.exception("start request failed")
            reply = _error(f"node agent internal error: {exc}")
        with contextlib.suppress(ConnectionError):
            writer.write(reply)
            await writer.drain()
        writer.close()


async def _read(reader: asyncio.StreamReader) -> bytes:
    """The request: everything up to the client's end of writing, within the size limit."""
    request = bytearray()
    while chunk := await reader.read(1 << 16):
        request += chunk
        if len(request) > agentprotocol.MAX_START_REQUEST + 4096:  # the state, plus op and paths
            raise InvalidRequestError("start request too large")
    return bytes(request)


def _error(message: str) -> bytes:
    return agentprotocol.REPLY_ERROR + message.replace("\n", " ").encode() + b"\n"
