"""Admission by quota: whether a queue may take a lease of so many GPUs, now or ever, by its
limit and, for a lease that is not preemptible, its deserved quota (docs/scheduling.md).

Pure: no I/O, no clock. It reads the GPUs each queue holds, which the pool's state keeps as
leases come and go (:class:`~radium.pool.core.state.PoolState`): a check must not walk every
lease.
"""

from __future__ import annotations

from typing import Callable, Mapping

from radium.errors import InvalidRequestError, QuotaError
from radium.pool.core.queues import EPSILON, Queues
from radium.pool.model import PriorityClass, Queue

__all__ = ["check"]


def check(
    queues: Queues,
    queue: Queue,
    cls: PriorityClass,
    size: float,
    used: Mapping[str, float],
    used_firm: Mapping[str, float],
    capacity: Callable[[], float],
) -> None:
    """InvalidRequestError when the queue can never hold ``size`` more GPUs; QuotaError (wait
    and it may pass) when its limit, or for a non-preemptible lease its deserved quota, is
    reached now. ``used`` and ``used_firm``: GPUs held per queue (ancestors included), by all
    leases and by non-preemptible ones; ``capacity``: GPUs on acceptors that can take leases
    (asked only for a non-preemptible lease: it sums every acceptor's)."""
    for q in queues.chain(queue.name):
        if q.limit >= 0 and size > q.limit + EPSILON:
            raise InvalidRequestError(
                f"{size:g} GPUs is more than queue {q.name!r} may ever hold ({q.limit:g})"
            )
        if q.limit >= 0 and used[q.name] + size > q.limit + EPSILON:
            raise QuotaError(
                f"queue {q.name!r} is at its limit: {used[q.name]:g} of {q.limit:g} GPUs held",
                hint="wait (--wait) for its leases to end, or raise its limit",
            )
        if not cls.preemptible:
            deserved = queues.deserved(q, capacity())
            if used_firm[q.name] + size > deserved + EPSILON:
                raise QuotaError(
                    f"a {cls.name} lease is not preemptible, so it only uses queue"
                    f" {q.name!r}'s deserved {deserved:g} GPUs, and"
                    f" {used_firm[q.name]:g} are held by such leases",
                    hint="ask with a preemptible priority (train, batch), or wait",
                )
