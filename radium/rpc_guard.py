"""The server's side of every control-plane call: who may make it (a bearer token for its
service, or the role of a mutual-TLS peer certificate), and the one place a ``RadiumError`` a
handler raised becomes the call's status (:class:`CallGuard`, through :func:`rpc.abort`)."""

from __future__ import annotations

import hmac
import logging
from typing import Any, AsyncIterator, Awaitable, Callable, Collection, Mapping, Optional

import grpc
import grpc.aio

from radium import errors
from radium.errors import RadiumError
from radium.rpc import AUTH_HEADER, abort

__all__ = [
    "CallGuard",
    "Check",
    "certificate_refused",
    "role_check",
    "token_check",
    "token_refused",
]

log = logging.getLogger(__name__)


#: Decides whether a call may run: (full method, servicer context) -> the refusal, or None.
Check = Callable[[str, Any], Optional[RadiumError]]


def token_check(tokens: Mapping[str, Collection[str]]) -> Check:
    """Calls must carry a bearer token accepted for their service (``radium.v1.Pool`` ...)."""
    accepted = {service: [t.encode() for t in ts if t] for service, ts in tokens.items()}

    def check(method: str, context: Any) -> RadiumError | None:
        presented = dict(context.invocation_metadata() or ()).get(AUTH_HEADER, "")
        token = presented[7:].encode() if presented.startswith("Bearer ") else b""
        return token_refused(method, token, accepted.get(_service(method), ()))

    return check


def token_refused(what: str, token: bytes, accepted: Collection[bytes]) -> RadiumError | None:
    """None when ``token`` is one of ``accepted`` (compared in constant time), else why not."""
    if token and any(hmac.compare_digest(token, good) for good in accepted):
        return None
    return errors.AuthError(f"{what}: token not accepted ({'wrong' if token else 'no'} token)")


def role_check(roles: Mapping[str, Collection[str]]) -> Check:
    """Calls must come with a certificate (verified by TLS) whose role may call the service."""

    def check(method: str, context: Any) -> RadiumError | None:
        pem = (context.auth_context() or {}).get("x509_pem_cert") or [b""]
        return certificate_refused(method, pem[0], roles.get(_service(method), ()))

    return check


def certificate_refused(what: str, pem: bytes, allowed: Collection[str]) -> RadiumError | None:
    """None when the certificate (verified by TLS) is of a role in ``allowed``, else why not."""
    from radium import certs

    try:
        role, name = certs.identity(pem)
    except RadiumError as exc:
        return exc
    if role in allowed:
        return None
    article = "an" if role[0] in "aeiou" else "a"
    return errors.PermissionDeniedError(
        f"{what}: {article} {role} certificate ({name}) may not call it",
        hint=f"it needs a certificate of role {' or '.join(sorted(allowed)) or 'none'}",
    )


def _service(method: str) -> str:
    return method.lstrip("/").split("/", 1)[0]


class CallGuard(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Runs ``check`` before every handler, refusing (logged) what it refuses, and ends a call
    whose handler raised a :class:`RadiumError` with that error's status (:func:`abort`): the
    one place errors become statuses, so servicers only raise. The refusal is made inside a
    handler of the call's own kind, so streaming calls are refused properly."""

    def __init__(self, check: Check) -> None:
        self._check = check

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> Optional[grpc.RpcMethodHandler]:
        handler = await continuation(details)
        if handler is None:
            return None
        method, check = details.method, self._check

        async def refused(context: Any) -> bool:
            error = check(method, context)
            if error is not None:
                log.warning("refused %s: %s", method, error.message)
                await abort(context, error)
            return False

        if handler.unary_unary is not None:
            inner = handler.unary_unary

            async def unary(request: Any, context: Any) -> Any:
                await refused(context)
                try:
                    return await inner(request, context)
                except RadiumError as error:
                    await abort(context, error)

            return grpc.unary_unary_rpc_method_handler(
                unary, handler.request_deserializer, handler.response_serializer
            )
        if handler.unary_stream is not None:
            streaming = handler.unary_stream

            async def stream(request: Any, context: Any) -> Any:
                await refused(context)
                async for item in _statused(streaming(request, context), context):
                    yield item

            return grpc.unary_stream_rpc_method_handler(
                stream, handler.request_deserializer, handler.response_serializer
            )
        if handler.stream_stream is not None:
            both = handler.stream_stream

            async def bidi(requests: Any, context: Any) -> Any:
                await refused(context)  # once, when the stream opens
                async for item in _statused(both(requests, context), context):
                    yield item

            return grpc.stream_stream_rpc_method_handler(
                bidi, handler.request_deserializer, handler.response_serializer
            )
        raise AssertionError(f"{method}: a client-streaming call: guard it before serving it")


async def _statused(items: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
    """A streaming handler's messages; the RadiumError it raises ends the call with its status."""
    try:
        async for item in items:
            yield item
    except RadiumError as error:
        await abort(context, error)
