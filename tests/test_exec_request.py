"""`radium exec`'s request: what it asks the pool for, as a container's annotations would."""

from __future__ import annotations

import argparse

import pytest

from radium.commands import exec_local
from radium.shim.request import allocation


def asked(*argv: str) -> dict[str, object] | None:
    parser = argparse.ArgumentParser()
    exec_local.register(parser.add_subparsers())
    args = parser.parse_args(["exec", *argv, "--remote", "numpy", "--", "python3", "app.py"])
    return allocation(exec_local.request_of(args))


@pytest.mark.parametrize(
    "argv, gpus, fraction",
    [
        ((), 1, 0.0),  # nothing named: one whole device
        (("--gpus", "2"), 2, 0.0),
        (("--fraction", "0.5"), 0, 0.5),  # a part of one, not a whole one besides
    ],
)
def test_the_amount_asked_for(argv: tuple[str, ...], gpus: int, fraction: float) -> None:
    request = asked(*argv)
    assert request is not None
    assert (request["gpus"], request["fraction"]) == (gpus, fraction)


def test_no_device_at_all() -> None:
    assert asked("--gpus", "0") is None


def test_memory_asks_for_a_part_of_one_device_as_radium_run_does() -> None:
    request = asked("--memory", "512")
    assert request is not None
    assert (request["gpus"], request["fraction"], request["memory_mib"]) == (0, 0.0, 512)
