"""`ListLeases`: the active leases, and the ended ones a page at a time (radium/proto/pool.proto).

Every page comes from the pool's memory (the store's :class:`radium.pool.store.ended.EndedLog`), so
a listing of the 10,000 ended leases a pool keeps holds its loop for a few milliseconds a page, not
for a read of them all. A page token names the last ended lease of the page before it: a lease that
ends meanwhile lands before the first page and shifts no later one, and one that is forgotten
meanwhile is skipped.
"""

from __future__ import annotations

import contextlib

from radium.errors import InvalidRequestError
from radium.pool.core import convert
from radium.pool.core.state import PoolState
from radium.pool.model import Lease
from radium.pool.store.ended import Entry
from radium.proto import pool_pb2 as pb

__all__ = ["PAGE_MOST", "list_leases", "page_cursor", "page_token"]

#: Ended leases a page holds at most, and when the request names no size.
PAGE_MOST = 500


def list_leases(state: PoolState, request: pb.ListLeasesRequest) -> pb.ListLeasesResponse:
    """One page of the listing; raises InvalidRequestError for a token this pool never gave."""
    before = page_cursor(request.page_token) if request.page_token else None
    leases: list[Lease] = [] if before else list(state.leases.values())
    next_token = ""
    if request.all:
        size = min(request.page_size or PAGE_MOST, PAGE_MOST)
        ended = state.store.ended_leases(size + 1, before)  # one more: is there a next page?
        if len(ended) > size:
            del ended[size:]
            next_token = page_token(ended[-1])
        leases += ended
    listed = [convert.lease_to_pb(lease) for lease in leases]
    for lease in listed:  # a credential goes to its holder and its acceptor, to no lister
        lease.ClearField("credential")
    return pb.ListLeasesResponse(leases=listed, next_page_token=next_token)


def page_token(last: Lease) -> str:
    """The token of the page after the one that ends with ``last``: its log entry, exactly."""
    return f"{last.ended_at.hex()}/{last.id}"


def page_cursor(token: str) -> Entry:
    """The entry a page token names; an ``InvalidRequestError`` for a token no page gave."""
    ended_at, _, lease_id = token.partition("/")
    with contextlib.suppress(ValueError):
        if lease_id:
            return float.fromhex(ended_at), lease_id
    raise InvalidRequestError(
        f"ListLeases: {token[:40]!r} is no page token of this pool",
        hint="list again from the first page (no page_token)",
    )
