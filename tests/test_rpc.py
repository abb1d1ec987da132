from __future__ import annotations

import asyncio
from typing import Any, NoReturn

import grpc
import pytest

from radium import errors, rpc, rpc_guard
from radium.errors import ConfigError, Kind


def test_every_kind_has_a_status_code() -> None:
    kinds = {v for k, v in vars(Kind).items() if not k.startswith("_")}
    assert kinds == set(rpc.CODES)


def test_round_trip_of_the_leaves() -> None:
    for leaf in (
        errors.CapacityError,
        errors.LeaseNotFoundError,
        errors.AuthError,
        errors.InvalidRequestError,
        errors.UnavailableError,
        errors.DeadlineError,
        errors.NotRegisteredError,
        errors.PermissionDeniedError,
        errors.AlreadyExistsError,
    ):
        code = rpc.CODES[leaf.kind]
        assert rpc.LEAVES[code] is leaf


def test_a_call_error_inside_a_stream_reads_as_the_unary_call_would() -> None:
    """A lease stream's CallError carries the status number; the client gets the same leaf."""
    for leaf in (errors.CapacityError, errors.LeaseNotFoundError, errors.InvalidRequestError):
        code, message = rpc.status_of(leaf("it failed", hint="do this"))
        error = rpc.from_status(code.value[0], message, "pool")
        assert type(error) is leaf and error.message == "it failed; do this"
    unknown = rpc.from_status(999, "odd", "pool")
    assert type(unknown) is errors.InternalError and unknown.message == "odd"
    assert rpc.status_of(errors.RadiumError("bug"))[0] is grpc.StatusCode.INTERNAL


class FakeCall(grpc.RpcError):
    """What grpc raises: an RpcError that also answers code() and details()."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


def test_translation_keeps_the_message_and_adds_a_hint() -> None:
    error = rpc.from_rpc_error(
        FakeCall(grpc.StatusCode.UNAVAILABLE, "connection refused"), "pool at x:1"
    )
    assert isinstance(error, errors.UnavailableError)
    assert error.one_line() == (
        "pool at x:1: unavailable (connection refused); "
        "is the service running and the address right?"
    )
    capacity = rpc.from_rpc_error(
        FakeCall(grpc.StatusCode.RESOURCE_EXHAUSTED, "no capacity"), "pool"
    )
    assert isinstance(capacity, errors.CapacityError) and capacity.message == "no capacity"


def test_a_failed_handshake_reads_as_one_line_about_certificates() -> None:
    details = (
        "failed to connect to all addresses; last error: UNKNOWN: ipv4:10.0.0.1:7400: "
        "Ssl handshake failed (TSI_PROTOCOL_FAILURE): SSL_ERROR_SSL: CERTIFICATE_VERIFY_FAILED"
    )
    error = rpc.from_rpc_error(FakeCall(grpc.StatusCode.UNAVAILABLE, details), "pool at p:1")
    assert isinstance(error, errors.AuthError)
    assert error.one_line().startswith("pool at p:1: TLS handshake failed")
    # The pool closing the connection: our certificate on a TLS channel, else maybe TLS itself.
    closed = FakeCall(grpc.StatusCode.UNAVAILABLE, "ipv4:10.0.0.1:7400: Socket closed")
    refused = rpc.from_rpc_error(closed, "pool at p:1", tls=True)
    assert isinstance(refused, errors.AuthError) and "refused this node's" in refused.message
    plain = rpc.from_rpc_error(closed, "pool at p:1")
    assert isinstance(plain, errors.UnavailableError) and "want TLS" in plain.hint


def test_a_list_of_pool_addresses_is_one_target_for_pick_first() -> None:
    assert rpc.target("10.0.0.1:7400") == "10.0.0.1:7400"  # one address: as given
    assert rpc.target("10.0.0.1:7400, 10.0.0.2:7401") == "ipv4:10.0.0.1:7400,10.0.0.2:7401"
    assert rpc.target("localhost:7400,127.0.0.2:7400").startswith("ipv")
    assert rpc.target("[::1]:7400,[::1]:7401") == "ipv6:[::1]:7400,[::1]:7401"
    with pytest.raises(ConfigError, match="not host:port"):
        rpc.target("10.0.0.1:7400,10.0.0.2")
    with pytest.raises(ConfigError, match="mix IPv4 and IPv6"):
        rpc.target("10.0.0.1:7400,[::1]:7400")


def test_a_call_the_server_cut_off_reads_as_unavailable_with_what_to_do() -> None:
    """Seen in CI when etcd lost its quorum under a pool replica: a call in flight ended with
    status CANCELLED, details "CANCELLED", and the client raised a bare RadiumError('CANCELLED')."""
    error = rpc.from_rpc_error(FakeCall(grpc.StatusCode.CANCELLED, "CANCELLED"), "pool at x:1")
    assert isinstance(error, errors.UnavailableError)
    assert error.one_line() == (
        "pool at x:1 cut the call off (it stopped, or lost its leadership, while answering); "
        "try again; a lease it may have granted meanwhile ends with its TTL"
    )
    inside_a_stream = rpc.from_status(grpc.StatusCode.CANCELLED.value[0], "CANCELLED", "pool")
    assert isinstance(inside_a_stream, errors.UnavailableError)


# -- errors become statuses at the edge: CallGuard (servicers only raise) ----------------------
class Details:
    """What a server interceptor is told of a call."""

    def __init__(self, method: str) -> None:
        self.method = method


class Aborted(Exception):
    pass


class AbortingContext:
    """What a grpc.aio servicer context does on abort: keeps the status and raises."""

    def __init__(self) -> None:
        self.status: tuple[grpc.StatusCode, str] | None = None

    async def abort(
        self, code: grpc.StatusCode, details: str, trailing_metadata: Any = ()
    ) -> NoReturn:
        self.status = (code, details)
        self.trailing = tuple(trailing_metadata)
        raise Aborted


def through_guard(method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """``handler`` as the pool's server runs it: behind a CallGuard that refuses nothing."""

    async def continuation(details: Any) -> grpc.RpcMethodHandler:
        return handler

    guard = rpc_guard.CallGuard(lambda method, context: None)
    return asyncio.run(guard.intercept_service(continuation, Details(method)))


async def _items(stream: Any) -> list[Any]:
    return [item async for item in stream]


def test_a_leaf_a_handler_raises_ends_its_call_with_the_leaf_s_status() -> None:
    async def unary(request: Any, context: Any) -> Any:
        raise errors.LeaseNotFoundError("no lease x", hint="allocate one")

    async def streaming(request: Any, context: Any) -> Any:
        yield 1
        raise errors.CapacityError("full")

    async def both(requests: Any, context: Any) -> Any:
        yield 1
        raise errors.InvalidRequestError("bad call")

    cases = [
        (grpc.unary_unary_rpc_method_handler(unary), "unary_unary", grpc.StatusCode.NOT_FOUND),
        (
            grpc.unary_stream_rpc_method_handler(streaming),
            "unary_stream",
            grpc.StatusCode.RESOURCE_EXHAUSTED,
        ),
        (
            grpc.stream_stream_rpc_method_handler(both),
            "stream_stream",
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
    ]
    for handler, kind, code in cases:
        guarded = getattr(through_guard("/radium.pool.Pool/X", handler), kind)
        context = AbortingContext()
        with pytest.raises(Aborted):
            if kind == "unary_unary":
                asyncio.run(guarded(None, context))
            else:
                asyncio.run(_items(guarded(None, context)))
        assert context.status is not None and context.status[0] is code, kind
    assert context.status[1] == "bad call"


def test_a_bug_is_not_taken_for_a_refusal() -> None:
    # Only RadiumError leaves are statuses of ours: anything else stays grpc's (UNKNOWN).
    async def unary(request: Any, context: Any) -> Any:
        raise KeyError("bug")

    guarded = through_guard("/x/Y", grpc.unary_unary_rpc_method_handler(unary)).unary_unary
    context = AbortingContext()
    with pytest.raises(KeyError):
        asyncio.run(guarded(None, context))
    assert context.status is None


class Failed(grpc.RpcError):
    """A client's failed call, as grpc raises it: its code, details and trailing metadata."""

    def __init__(self, code: grpc.StatusCode, details: str, trailing: Any) -> None:
        self._code, self._details, self._trailing = code, details, trailing

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> Any:
        return self._trailing


def test_the_client_raises_the_very_leaf_the_server_raised() -> None:
    # The server's guard names the leaf in the call's trailing metadata; the client raises it
    # (``except QuotaError``), and only a leaf of the status's own kind.
    async def unary(request: Any, context: Any) -> Any:
        raise errors.QuotaError("queue q is at its limit")

    guarded = through_guard("/x/Y", grpc.unary_unary_rpc_method_handler(unary)).unary_unary
    context = AbortingContext()
    with pytest.raises(Aborted):
        asyncio.run(guarded(None, context))
    assert context.status is not None
    failed = Failed(*context.status, context.trailing)
    assert type(rpc.from_rpc_error(failed, "pool")) is errors.QuotaError
    wrong_kind = Failed(
        grpc.StatusCode.RESOURCE_EXHAUSTED, "x", ((rpc.ERROR_CLASS, "ConfigError"),)
    )
    assert type(rpc.from_rpc_error(wrong_kind, "pool")) is errors.CapacityError
    unnamed = Failed(grpc.StatusCode.NOT_FOUND, "x", None)  # an older server: its code only
    assert type(rpc.from_rpc_error(unnamed, "pool")) is errors.LeaseNotFoundError


def test_over_a_real_channel_the_client_gets_the_server_s_leaf(tmp_path: Any) -> None:
    # A grpc.aio server behind the guard, a grpc client on its unix socket: the status, the
    # one line and the leaf's name cross as the pool's calls do.
    async def quota(request: bytes, context: Any) -> bytes:
        raise errors.QuotaError("queue q is at its limit", hint="wait for a lease to end")

    handler = grpc.method_handlers_generic_handler(
        "radium.Test", {"Quota": grpc.unary_unary_rpc_method_handler(quota)}
    )
    address = f"unix:{tmp_path / 'rpc.sock'}"

    async def scenario() -> errors.RadiumError:
        server = grpc.aio.server(interceptors=[rpc_guard.CallGuard(lambda method, context: None)])
        server.add_generic_rpc_handlers((handler,))
        server.add_insecure_port(address)
        await server.start()
        try:
            async with grpc.aio.insecure_channel(address) as channel:
                call = channel.unary_unary("/radium.Test/Quota")
                try:
                    await call(b"", timeout=10)
                except grpc.aio.AioRpcError as exc:
                    return rpc.from_rpc_error(exc, "test")
            raise AssertionError("the call succeeded")
        finally:
            await server.stop(None)

    error = asyncio.run(scenario())
    assert type(error) is errors.QuotaError
    assert error.message == "queue q is at its limit; wait for a lease to end"
