"""gRPC plumbing shared by every control-plane service and client.

The one table mapping Radium's error kinds to gRPC status codes lives here, with both
directions of translation, the token interceptor, and channel creation with deadlines.
"""

from __future__ import annotations

import hmac
import logging
from typing import Any, Awaitable, Callable, Collection, Mapping, NoReturn, Optional

import grpc
import grpc.aio

from radium import errors
from radium.errors import Kind, RadiumError

log = logging.getLogger(__name__)

#: RadiumError kind <-> gRPC status code: the only place this mapping is written down.
CODES: Mapping[str, grpc.StatusCode] = {
    Kind.INVALID_ARGUMENT: grpc.StatusCode.INVALID_ARGUMENT,
    Kind.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    Kind.ALREADY_EXISTS: grpc.StatusCode.ALREADY_EXISTS,
    Kind.FAILED_PRECONDITION: grpc.StatusCode.FAILED_PRECONDITION,
    Kind.PERMISSION_DENIED: grpc.StatusCode.PERMISSION_DENIED,
    Kind.UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
    Kind.RESOURCE_EXHAUSTED: grpc.StatusCode.RESOURCE_EXHAUSTED,
    Kind.UNAUTHENTICATED: grpc.StatusCode.UNAUTHENTICATED,
    Kind.DEADLINE_EXCEEDED: grpc.StatusCode.DEADLINE_EXCEEDED,
    Kind.INTERNAL: grpc.StatusCode.INTERNAL,
}
#: The leaf a client raises for each status code.
LEAVES: Mapping[grpc.StatusCode, type[RadiumError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: errors.InvalidRequestError,
    grpc.StatusCode.NOT_FOUND: errors.LeaseNotFoundError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: errors.CapacityError,
    grpc.StatusCode.UNAUTHENTICATED: errors.AuthError,
    grpc.StatusCode.UNAVAILABLE: errors.UnavailableError,
    grpc.StatusCode.DEADLINE_EXCEEDED: errors.DeadlineError,
    grpc.StatusCode.FAILED_PRECONDITION: errors.NotRegisteredError,
}
_HINTS: Mapping[grpc.StatusCode, str] = {
    grpc.StatusCode.UNAVAILABLE: "is the service running and the address right?",
    grpc.StatusCode.UNAUTHENTICATED: "check the token in the Radium config",
    grpc.StatusCode.DEADLINE_EXCEEDED: "the service is overloaded or stuck; try again",
}

AUTH_HEADER = "authorization"
_CHANNEL_OPTIONS = [
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.max_receive_message_length", 16 << 20),
]


async def abort(context: Any, error: RadiumError) -> NoReturn:
    await context.abort(CODES.get(error.kind, grpc.StatusCode.INTERNAL), error.one_line())
    raise AssertionError("unreachable: abort raises")


def from_rpc_error(exc: grpc.RpcError, service: str) -> RadiumError:
    """A RadiumError for a failed call (use as ``raise from_rpc_error(e, ...) from e``)."""
    # grpc.RpcError subclasses (sync and aio) carry code() and details(); the base class does not.
    code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
    details = (exc.details() if hasattr(exc, "details") else None) or str(exc)
    leaf = LEAVES.get(code, RadiumError)
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        details = f"{service}: {code.name.lower().replace('_', ' ')} ({details})"
    return leaf(details, hint=_HINTS.get(code, ""))


def metadata(token: str) -> tuple[tuple[str, str], ...]:
    return ((AUTH_HEADER, f"Bearer {token}"),) if token else ()


def channel(address: str) -> grpc.Channel:
    return grpc.insecure_channel(address, options=_CHANNEL_OPTIONS)


def aio_channel(address: str) -> grpc.aio.Channel:
    return grpc.aio.insecure_channel(address, options=_CHANNEL_OPTIONS)


class TokenAuth(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Refuse (UNAUTHENTICATED, logged) any call whose bearer token is not accepted for its service.

    ``tokens`` maps a full service name (``radium.v1.Pool``) to the tokens it accepts.
    """

    def __init__(self, tokens: Mapping[str, Collection[str]]) -> None:
        self._tokens = {
            service: [t.encode() for t in accepted if t] for service, accepted in tokens.items()
        }

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> Optional[grpc.RpcMethodHandler]:
        service = details.method.lstrip("/").split("/", 1)[0]
        presented = dict(details.invocation_metadata or ()).get(AUTH_HEADER, "")
        token = presented[7:].encode() if presented.startswith("Bearer ") else b""
        if token and any(hmac.compare_digest(token, ok) for ok in self._tokens.get(service, ())):
            return await continuation(details)
        log.warning("refused %s: %s token", details.method, "wrong" if token else "no")
        return _refuse(details)


def _refuse(details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
    async def deny(request: Any, context: Any) -> None:
        await context.abort(
            grpc.StatusCode.UNAUTHENTICATED, f"{details.method}: token not accepted"
        )

    async def deny_stream(request: Any, context: Any) -> Any:
        await context.abort(
            grpc.StatusCode.UNAUTHENTICATED, f"{details.method}: token not accepted"
        )
        yield  # pragma: no cover

    if details.method.endswith("/Watch"):
        return grpc.unary_stream_rpc_method_handler(deny_stream)
    return grpc.unary_unary_rpc_method_handler(deny)
