"""Which leases to take back for a request: the fewest, in the order the queues' rules offer
them (:func:`radium.pool.core.reclaim.victims`)."""

from __future__ import annotations

from typing import Callable

from radium.pool.model import Lease

__all__ = ["fewest"]

#: Whether the request could be placed were these leases gone; whether taking them all keeps
#: every queue its deserved quota.
Test = Callable[[list[Lease]], bool]


def fewest(candidates: list[Lease], fits: Test, allowed: Test) -> list[Lease]:
    """One lease that makes room alone is the least to take; else the first that together do,
    each queue keeping its deserved quota, less each the request can do without (tried in vain
    before the one that made room, say on another device). None when no such set exists."""
    alone = next((lease for lease in candidates if fits([lease])), None)
    if alone is not None:
        return [alone]
    taken: list[Lease] = []
    for lease in candidates:
        if allowed([*taken, lease]):
            taken.append(lease)
            if fits(taken):
                break
    else:
        return []
    for lease in list(taken):
        rest = [other for other in taken if other is not lease]
        if fits(rest):
            taken = rest
    return taken
