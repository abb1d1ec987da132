"""ListLeases a page at a time (radium.pool.leases.listing): every lease once, newest ended first,
from the pool's memory; a token the pool never gave is the caller's error."""

from __future__ import annotations

import asyncio
import itertools

import grpc
import pytest

from radium.errors import InvalidRequestError
from radium.pool.api.service import PoolService
from radium.pool.core.dispatcher import Dispatcher
from radium.pool.leases.leasing import Leasing
from radium.pool.leases.listing import list_leases
from radium.proto import pool_pb2 as pb
from tests.pool.test_queues import pool
from tests.test_rpc import Aborted, AbortingContext, through_guard


def churned(ended: int) -> tuple[Leasing, pb.Lease]:
    """A pool whose clock ticks a second a call: ``ended`` leases granted and released one
    after another, then one held."""
    ticks = itertools.count(1.0)
    leasing = Leasing(Dispatcher(pool(gpus=1), clock=lambda: next(ticks)))
    for n in range(ended):
        lease = leasing.allocate_now(pb.AllocateRequest(gpus=1, holder=f"job-{n}"))
        assert lease is not None
        leasing.release(lease.id)
    held = leasing.allocate_now(pb.AllocateRequest(gpus=1, holder="held"))
    assert held is not None
    return leasing, held


def test_pages_hold_the_active_leases_then_every_ended_one_once_newest_first() -> None:
    leasing, held = churned(25)
    state = leasing.pool.state
    request = pb.ListLeasesRequest(all=True, page_size=10)
    pages = []
    while True:
        page = list_leases(state, request)
        pages.append([le.holder for le in page.leases])
        if not page.next_page_token:
            break
        request.page_token = page.next_page_token
    assert pages == [
        ["held", *(f"job-{n}" for n in range(24, 14, -1))],
        [f"job-{n}" for n in range(14, 4, -1)],
        [f"job-{n}" for n in range(4, -1, -1)],
    ]
    # Without a size, a page holds up to 500; without `all`, only the active leases.
    assert len(list_leases(state, pb.ListLeasesRequest(all=True)).leases) == 26
    only = list_leases(state, pb.ListLeasesRequest(page_size=10))
    assert [le.id for le in only.leases] == [held.id] and not only.next_page_token


def test_a_lease_that_ends_between_pages_lands_before_the_first_and_shifts_none() -> None:
    leasing, held = churned(4)
    state = leasing.pool.state
    first = list_leases(state, pb.ListLeasesRequest(all=True, page_size=2))
    leasing.release(held.id)
    rest = list_leases(
        state, pb.ListLeasesRequest(all=True, page_size=2, page_token=first.next_page_token)
    )
    assert [le.holder for le in first.leases] == ["held", "job-3", "job-2"]
    assert [le.holder for le in rest.leases] == ["job-1", "job-0"]
    assert not rest.next_page_token


@pytest.mark.parametrize("token", ["garbage", "0x1p+0", "zz/l-1", "/", "0x1p+0/"])
def test_a_page_token_the_pool_never_gave_is_refused_with_one_line(token: str) -> None:
    leasing, _ = churned(2)
    with pytest.raises(InvalidRequestError, match="is no page token of this pool"):
        list_leases(leasing.pool.state, pb.ListLeasesRequest(all=True, page_token=token))


def test_the_service_answers_a_bad_token_invalid_argument() -> None:
    leasing, _ = churned(2)
    context = AbortingContext()
    request = pb.ListLeasesRequest(all=True, page_token="garbage")
    method = "/radium.pool.Pool/ListLeases"  # the servicer raises; the server's guard aborts
    handler = grpc.unary_unary_rpc_method_handler(PoolService(leasing.pool).ListLeases)
    with pytest.raises(Aborted):
        asyncio.run(through_guard(method, handler).unary_unary(request, context))
    assert context.status is not None
    code, details = context.status
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "no page token" in details
