"""Waiting requests: in order inside a queue's line, fair across queues, reclaiming when owed."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from radium.errors import InvalidRequestError
from radium.pool.core.waiting import WaitingRoom
from radium.pool.model import Lease, Queue, Request
from tests.pool.test_queues import GRACE, pool


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


class Room:
    """A waiting room on a real PoolState; grants go to the state, notices are recorded."""

    def __init__(self, loop: asyncio.AbstractEventLoop, *configured: Queue, gpus: int) -> None:
        self.loop = loop
        self.state = pool(*configured, gpus=gpus)
        self.noticed: list[Lease] = []
        self.room = WaitingRoom(
            self.state,
            lambda request: self.state.allocate(request, 1.0),
            self.noticed.extend,
            lambda: 1.0,
            GRACE,
        )

    def wait(self, request: Request) -> asyncio.Future[Lease]:
        future: asyncio.Future[Lease] = self.loop.create_future()
        self.room.add(request, future)
        return future


def test_inside_a_line_requests_are_served_in_order(loop: asyncio.AbstractEventLoop) -> None:
    room = Room(loop, Queue("a", deserved=2), gpus=2)
    held = room.state.allocate(Request(gpus=1, queue="a"), 0)
    big = room.wait(Request(gpus=2, queue="a"))
    small = room.wait(Request(gpus=1, queue="a"))
    room.room.serve()
    assert not big.done() and not small.done()  # the small one does not overtake the big
    room.state.release(held.id, 2)
    room.room.serve()
    assert big.done() and not small.done()


def test_a_request_waiting_on_its_quota_does_not_block_borrowing_ones(
    loop: asyncio.AbstractEventLoop,
) -> None:
    room = Room(loop, Queue("a", deserved=1), Queue("default", weight=0), gpus=4)
    room.state.allocate(Request(gpus=1, queue="a", priority="build"), 0)
    firm = room.wait(Request(gpus=1, queue="a", priority="build"))  # over a's deserved 1
    borrowing = room.wait(Request(gpus=2, queue="a", priority="train"))
    room.room.serve()
    assert not firm.done()
    assert borrowing.done() and borrowing.result().queue == "a"


def test_the_queue_furthest_below_its_due_is_served_first(
    loop: asyncio.AbstractEventLoop,
) -> None:
    room = Room(loop, Queue("a", deserved=2), Queue("b", deserved=2), gpus=4)
    leases = [room.state.allocate(Request(gpus=1, queue="a"), 0) for _ in range(3)]
    leases.append(room.state.allocate(Request(gpus=1, queue="b"), 0))
    from_a = room.wait(Request(gpus=1, queue="a"))  # a holds 3 of its 2: over its due
    from_b = room.wait(Request(gpus=1, queue="b"))  # b holds 1 of its 2
    room.state.release(leases[0].id, 2)
    room.room.serve()
    assert from_b.done() and not from_a.done()


def test_an_owed_queue_reclaims_once_and_is_served_when_the_notice_ends(
    loop: asyncio.AbstractEventLoop,
) -> None:
    room = Room(loop, Queue("a", deserved=1), Queue("b", deserved=1), gpus=2)
    borrowed = [room.state.allocate(Request(gpus=1, queue="a"), 0) for _ in range(2)]
    owed = room.wait(Request(gpus=1, queue="b"))
    room.room.serve()
    room.room.serve()  # a second pass takes no more while the notice runs
    assert len(room.noticed) == 1 and room.noticed[0].id in {le.id for le in borrowed}
    assert not owed.done()
    room.state.reap(1.0 + GRACE + 1)  # the grace period is over
    room.room.serve()
    assert owed.done() and owed.result().queue == "b"


def test_an_unknown_queue_or_class_is_refused_before_it_waits(
    loop: asyncio.AbstractEventLoop,
) -> None:
    room = Room(loop, Queue("a"), gpus=1)
    for request in (Request(gpus=1, queue="nope"), Request(gpus=1, priority="urgent")):
        with pytest.raises(InvalidRequestError):
            room.wait(request)
    assert len(room.room) == 0
