from __future__ import annotations

import grpc

from radium import errors, rpc
from radium.errors import Kind


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
