"""A request the pool cannot serve is told what is free now and how to wait (issue 35, 12)."""

from __future__ import annotations

import asyncio

import pytest

from radium.errors import CapacityError
from radium.pool.core.dispatcher import Dispatcher
from radium.pool.leases.leasing import Leasing
from radium.proto import pool_pb2 as pb
from tests.pool.test_queues import pool

FREE = "1 matching GPU wholly free, at most 1000 MiB free on one"
WAIT = "--wait SECONDS (RADIUM_WAIT, radium.io/wait; up to 3600)"


def refusals(*waits: float) -> list[str]:
    """The one line of each refusal of 2 GPUs, asked one after the other, on a pool of 2 with
    one held."""

    async def run() -> list[str]:
        leasing = Leasing(Dispatcher(pool(gpus=2), clock=lambda: 1.0))
        assert leasing.allocate_now(pb.AllocateRequest(gpus=1, holder="hog")) is not None
        lines = []
        for wait in waits:
            with pytest.raises(CapacityError) as refused:
                await leasing.allocate(pb.AllocateRequest(gpus=2, holder="me", wait_seconds=wait))
            lines.append(refused.value.one_line())
        return lines

    return asyncio.run(run())


def test_a_refusal_names_what_is_free_and_the_wait_option() -> None:
    assert refusals(0) == [
        f"no capacity for 2 whole GPUs: {FREE}; ask for what is free, or wait for it: {WAIT}"
    ]


def test_a_wait_that_ran_out_says_so_and_what_is_free() -> None:
    assert refusals(0.01) == [
        f"no capacity for 2 whole GPUs within 0.01s: {FREE}; ask for what is free, or wait "
        f"longer: {WAIT}"
    ]


def test_a_request_that_gave_up_waiting_puts_no_later_one_in_line() -> None:
    """The waiter that timed out stayed listed until the next serve: a request asking no wait
    then went in line behind nobody and was refused "within 0s"."""
    first, _, last = refusals(0, 0.01, 0)
    assert last == first
