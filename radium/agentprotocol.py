"""The node agent's control protocol: operation names and one-line JSON framing.

docs/agent-protocol.md is the specification. The hook's client (:mod:`radium.agentclient`)
imports this module on every container start, so it imports nothing beyond ``json``.
"""

from __future__ import annotations

import json
import os

from radium.errors import InvalidRequestError, Kind, RadiumError, rebuild

# Not typing.TYPE_CHECKING: importing typing costs milliseconds on every container start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "ACQUIRE",
    "CONNECT",
    "CREATE",
    "DELETE",
    "FIELD_SEPARATOR",
    "LIST",
    "MAX_REQUEST",
    "MAX_START_REQUEST",
    "PING",
    "POSTSTOP",
    "PRESTART",
    "RELEASE",
    "RENDEZVOUS_DIR",
    "REPLY_ERROR",
    "REPLY_OK",
    "REPLY_PASS",
    "REQUEST_TIMEOUT",
    "START_SOCKET",
    "bad_request",
    "bad_request_line",
    "claim_key",
    "encode",
    "error_from_reply",
    "error_reply",
    "parse_request",
    "rendezvous_name",
    "start_socket",
]

PING = "ping"
ACQUIRE = "acquire"
RELEASE = "release"
LIST = "list"
#: On a container's data-plane socket: dial the lease's acceptor and pass the socket in.
CONNECT = "connect"

# The start socket (docs/agent-protocol.md section 2): plain text, so that its client, run on
# every Radium container start, imports nothing (bin/radium-agent-call spells these again).
#: The wrapper's create (the shim's start): add the agent's hooks to the bundle's spec.
CREATE = "create"
#: The prestart hook: take the lease and mount the bundle into the container.
PRESTART = "prestart"
#: The poststop hook: give the lease back and remove the runtime directory.
POSTSTOP = "poststop"
#: The shim's delete: the same as poststop, for a container that may never have started.
DELETE = "delete"
#: Replies: done; not this agent's to do (the caller takes the full Python path); failed.
REPLY_OK = b"ok\n"
REPLY_PASS = b"pass\n"
REPLY_ERROR = b"error "
#: Field separator of a start request (no path, id or JSON document holds a NUL).
FIELD_SEPARATOR = b"\0"
#: The longest start request (the OCI state may carry large annotations).
MAX_START_REQUEST = 1 << 20
#: Where each agent links its start socket, under its config file's path quoted by
#: :func:`rendezvous_name`: how the runtime's shell front finds it without reading TOML.
RENDEZVOUS_DIR = "/run/radium/agents"
START_SOCKET = "start.sock"

#: The longest request line the agent reads.
MAX_REQUEST = 1 << 16
#: Seconds a connection has to send its request.
REQUEST_TIMEOUT = 10.0


def claim_key(uid: str) -> str:
    """The agent's key for a DRA claim's lease (docs/agent-protocol.md, "Claims"): no container
    id holds a ``/``, so no container can pass for a claim."""
    return f"claim/{uid}"


def parse_request(line: bytes) -> dict[str, Any]:
    """One request line as a dict; InvalidRequestError when it is not a JSON object."""
    if len(line) > MAX_REQUEST:
        raise InvalidRequestError("request too large")
    try:
        message = json.loads(line)
    except ValueError as exc:
        raise InvalidRequestError("a request is one JSON object per line") from exc
    if not isinstance(message, dict):
        raise InvalidRequestError("a request is one JSON object per line")
    return message


def error_reply(exc: RadiumError) -> dict[str, Any]:
    """The reply that makes the client raise the same error: its leaf, hint and kind."""
    return {
        "ok": False,
        "error": exc.message,
        "hint": exc.hint,
        "kind": exc.kind,
        "class": type(exc).__name__,
    }


def error_from_reply(reply: dict[str, Any]) -> RadiumError:
    """The error an :func:`error_reply` carries, to raise again: the leaf it names when that is
    one of ours of its kind, else its kind's (errors.rebuild)."""
    return rebuild(
        str(reply.get("kind", Kind.INTERNAL)),
        str(reply.get("error", "unknown error")),
        hint=str(reply.get("hint", "")),
        name=str(reply.get("class", "")),
    )


def bad_request_line(exc: BaseException) -> str:
    """What a peer whose request could not be read is told: too late, cut off, too long."""
    return f"bad request: {type(exc).__name__}"


def bad_request(exc: BaseException) -> dict[str, Any]:
    """The JSON reply of :func:`bad_request_line` (the control and data-plane sockets)."""
    return {"ok": False, "error": bad_request_line(exc)}


def rendezvous_name(config_path: str) -> str:
    """The file name of the link to the agent that runs with ``config_path`` (absolute)."""
    return config_path.replace("%", "%25").replace("/", "%2F")


def start_socket(control_socket: str) -> str:
    """The start socket, beside the control socket (``[agent] socket``)."""
    return os.path.join(os.path.dirname(control_socket), START_SOCKET)


def encode(message: dict[str, Any]) -> bytes:
    """One request or reply as the protocol frames it: a line of JSON."""
    return json.dumps(message).encode() + b"\n"
