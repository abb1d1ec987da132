"""Talking to the node agent over its unix socket: JSON lines, no gRPC (hook start latency).

Each call is one connection: one request line, one reply line. When the agent is not running
and autostart is on, the caller starts it and waits for its socket.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

from radium import agentprotocol
from radium.errors import RadiumError, UnavailableError

# Not typing.TYPE_CHECKING: importing typing costs milliseconds on every container start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Mapping

    from radium.configtree import Config

__all__ = [
    "IDLE_EXIT",
    "MAX_REPLY",
    "START_TIMEOUT",
    "acquire",
    "call",
    "ensure_running",
    "release",
]

MAX_REPLY = 1 << 20
START_TIMEOUT = 10.0
#: An agent started here exits once idle this long, holding no lease, cut off from its pool
#: (agent/process.py): a failed exec or container start must not leave it running.
IDLE_EXIT = 5.0


def call(path: str, message: dict[str, Any], timeout: float = 30.0) -> dict[str, Any]:
    """Send one request; the reply, or the agent's error raised as a RadiumError."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(path)
            sock.sendall(agentprotocol.encode(message))
            reply = b""
            while not reply.endswith(b"\n") and len(reply) < MAX_REPLY:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                reply += chunk
        except OSError as exc:
            raise UnavailableError(
                f"node agent at {path}: {exc.strerror or exc}", hint="is 'radium agent' running?"
            ) from exc
    try:
        data = json.loads(reply)
    except ValueError as exc:
        raise UnavailableError(f"node agent at {path} answered garbage") from exc
    if not isinstance(data, dict):
        raise UnavailableError(f"node agent at {path} answered garbage")
    if not data.get("ok"):
        raise agentprotocol.error_from_reply(data)
    return data


def acquire(
    config: Config,
    container: str,
    pid: int,
    request: Mapping[str, str],
    runtime_dir: str,
    wait: float = 0.0,
) -> dict[str, Any] | None:
    """The container's lease (None when its request asks for no device); ``wait``: the seconds
    the request may wait for capacity (``radium.io/wait``), which the call waits beyond its own.

    One round trip when the agent runs: it is started (autostart) only after a failed connect,
    and acquire is idempotent in the agent, so asking again after that is safe.
    """
    message = {
        "op": agentprotocol.ACQUIRE,
        "container": container,
        "pid": pid,
        "request": dict(request),
        "runtime_dir": runtime_dir,
    }
    timeout = 30.0 + wait
    try:
        reply = call(config.agent.socket, message, timeout)
    except UnavailableError:
        ensure_running(config)
        reply = call(config.agent.socket, message, timeout)
    lease = reply.get("lease")
    return lease if isinstance(lease, dict) else None


def release(config: Config, container: str) -> None:
    """Give the container's lease back (idempotent)."""
    call(config.agent.socket, {"op": agentprotocol.RELEASE, "container": container}, timeout=10)


def ensure_running(config: Config) -> None:
    """Start the agent in the background when its socket does not answer (and autostart is on)."""
    path = config.agent.socket
    if _answers(path):
        return
    if not config.agent.autostart:
        raise UnavailableError(
            f"the node agent is not running (no {path})", hint="start 'radium agent' or its unit"
        )
    import sysconfig

    agent = os.path.join(sysconfig.get_path("scripts"), "radium")
    os.makedirs(os.path.dirname(config.agent.log_file) or ".", exist_ok=True)
    with open(config.agent.log_file, "ab") as log:
        subprocess.Popen(
            [sys.executable, "-I", agent, "agent"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            close_fds=True,
            env={
                "PATH": os.environ.get("PATH", os.defpath),
                **_radium_env(),
                "RADIUM_AGENT_IDLE_EXIT": f"{IDLE_EXIT:g}",  # process.IDLE_EXIT_ENV
            },
        )
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if _answers(path):
            return
        time.sleep(0.05)
    raise UnavailableError(
        f"the node agent did not start within {START_TIMEOUT:g}s",
        hint=f"see {config.agent.log_file}",
    )


def _radium_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k in ("RADIUM_CONFIG", "RADIUM_DEBUG")}


def _answers(path: str) -> bool:
    try:
        call(path, {"op": agentprotocol.PING}, timeout=2)
    except RadiumError:
        return False
    return True
