"""The agent's mount helper: a single-threaded process that puts bundles into containers.

Joining a container's mount namespace (setns) is refused to a process with threads, and the
agent has gRPC's. So the agent starts this helper once, with the hook's modules already
imported, and asks it over a pipe. For each container the helper forks a child that joins the
namespace, mounts (:func:`radium.hooks.inject.mount_bundle`) and exits: the helper itself never
leaves the host's namespace, and a failed mount leaves nothing behind in it.

Pipe protocol, one JSON line each way: ``{"state": OCI_STATE_TEXT, "runtime_dir": DIR}`` and
``{"ok": true}`` or :func:`radium.agentprotocol.error_reply`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any, Mapping

from radium import gc_tuning
from radium.agentprotocol import error_from_reply, error_reply
from radium.configtree import Config
from radium.errors import RadiumError, UnavailableError

__all__ = ["MOUNT_TIMEOUT", "PROGRAM", "MountHelper", "main"]

log = logging.getLogger(__name__)
#: The helper's own name in `ps` and logs.
PROGRAM = "radium agent mount helper"
#: Seconds one container's mounts may take (the hook's own limit is 30 s and up).
MOUNT_TIMEOUT = 30.0


class MountHelper:
    """The agent's side: one helper process, one request at a time, restarted if it dies."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = dict(environ)
        self._process: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        self._process = await asyncio.create_subprocess_exec(
            sys.executable, "-I", "-m", __name__,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=self._environ,
            start_new_session=True,  # its children die with it when a mount hangs (close)
        )  # fmt: skip

    async def mount_bundle(self, state: bytes, runtime_dir: str) -> None:
        """Mount the bundle into the container of ``state`` (the OCI state as the hook got it);
        the helper's error as RadiumError."""
        request = json.dumps({"state": state.decode(), "runtime_dir": runtime_dir}).encode()
        request += b"\n"
        async with self._lock:
            if self._process is None or self._process.returncode is not None:
                await self.start()
            process = self._process
            assert process is not None and process.stdin and process.stdout
            try:
                process.stdin.write(request)
                await process.stdin.drain()
                line = await asyncio.wait_for(process.stdout.readline(), MOUNT_TIMEOUT)
            except (ConnectionError, OSError, asyncio.TimeoutError) as exc:
                line = b""
                log.error("mount helper: %s", type(exc).__name__)
            if not line:  # dead or hung (a stuck mount): kill it and its child, start anew
                await self._stop()
                raise UnavailableError(
                    "the node agent's mount helper died or hung while mounting",
                    hint="see the agent's log; the next container starts a new one",
                )
        reply = json.loads(line)
        if not reply.get("ok"):
            raise error_from_reply(reply)

    async def _stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()

    async def close(self) -> None:
        async with self._lock:
            await self._stop()


def _serve_one(line: bytes, config: Config) -> dict[str, Any]:
    """Fork a child that mounts; its one-line answer, or why it gave none."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: mount, answer, exit without running the helper's cleanups
        os.close(read_end)
        status = 0
        try:
            answer = _mount(line, config)
        except BaseException as exc:
            log.exception("mounting failed")
            answer, status = {"ok": False, "error": f"mount helper internal error: {exc}"}, 2
        with contextlib.suppress(OSError):
            os.write(write_end, json.dumps(answer).encode())
        os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as answers:
        data = answers.read()
    _, status = os.waitpid(pid, 0)
    if data:
        return dict(json.loads(data))
    return {"ok": False, "error": f"mount helper child ended with status {status} and no answer"}


def _mount(line: bytes, config: Config) -> dict[str, Any]:
    from radium.hooks import inject
    from radium.hooks.state import parse_state

    request = json.loads(line)
    state = parse_state(request["state"].encode())
    try:
        inject.mount_bundle(state, config, Path(request["runtime_dir"]))
    except RadiumError as exc:
        return error_reply(exc)
    return {"ok": True}


def _warm_up() -> None:
    """Detect the host's own root once, so that what detection loads and compiles lazily
    (distro's patterns, codecs) is loaded here, before the fork, not in every child."""
    import tempfile

    from radium.hooks import detect, safepath

    root_fd = safepath.open_root(Path("/"))
    try:
        with tempfile.TemporaryDirectory(prefix="radium-warm-up-") as scratch:
            detect.detect(root_fd, Path(scratch) / "release")
    except (OSError, RadiumError) as exc:  # only a lost head start
        log.warning("mount helper warm-up: %s", exc)
    finally:
        os.close(root_fd)


def main() -> int:
    """The mount helper process: mount bundles for the agent, one request a line, until its pipe
    closes."""
    from radium import config as config_module
    from radium import logs
    from radium.hooks import detect, inject  # noqa: F401 - imported once, for every child

    config = config_module.load()
    logs.setup(PROGRAM, config.hook.log_file)
    _warm_up()
    # The children's collector stays off what they inherit: a collection in a forked child
    # walks every object the helper made, and touching them copies their pages (~1.5 ms of
    # each container's mount, docs/agent-protocol.md). Frozen, they are never walked.
    gc_tuning.settle()
    for line in sys.stdin.buffer:
        sys.stdout.buffer.write(json.dumps(_serve_one(line, config)).encode() + b"\n")
        sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
