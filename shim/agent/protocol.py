"""The node agent's control protocol: operation names and one-line JSON framing.

docs/agent-protocol.md is the specification. The hook's client (:mod:`radium.shim.agentclient`)
imports this module on every container start, so it imports nothing beyond ``json``.
"""

from __future__ import annotations

import json

from radium.errors import InvalidRequestError, RadiumError

# Not typing.TYPE_CHECKING: importing typing costs milliseconds on every container start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PING = "ping"
ACQUIRE = "acquire"
RELEASE = "release"
LIST = "list"
#: On a container's data-plane socket: dial the lease's acceptor and pass the socket in.
CONNECT = "connect"

#: The longest request line the agent reads.
MAX_REQUEST = 1 << 16
#: Seconds a connection has to send its request.
REQUEST_TIMEOUT = 10.0


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
    """The reply that makes the client raise the same error, with its hint and kind."""
    return {"ok": False, "error": exc.message, "hint": exc.hint, "kind": exc.kind}


def bad_request(exc: BaseException) -> dict[str, Any]:
    """The reply to a peer whose request could not be read: too late, cut off, too long."""
    return {"ok": False, "error": f"bad request: {type(exc).__name__}"}


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"
