from __future__ import annotations

import grpc
import pytest

from radium import errors, rpc
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
