"""Whose leases a request may take back, by the queues' rules (docs/scheduling.md), after
KAI-Scheduler:

- Reclaim: a request whose queue would stay within its fair share may take preemptible leases
  of other queues that are over their fair share, as long as each such queue keeps its
  deserved quota.
- Preempt: inside one queue, a request takes preemptible leases of strictly lower priority.

Pure: no I/O, no clock. Amounts are GPUs, as in :mod:`radium.pool.core.queues`.
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping

from radium.pool.core import preemption
from radium.pool.core.queues import EPSILON, Queues, lease_size, priority_class
from radium.pool.model import Lease, PriorityClass, Queue

__all__ = ["keep_deserved", "to_take", "victims"]


def to_take(
    queues: Queues,
    queue: Queue,
    cls: PriorityClass,
    size: float,
    standing: list[Lease],
    capacity: float,
    waiting: Mapping[str, float],
    fits: Callable[[list[Lease]], bool],
) -> list[Lease]:
    """The fewest of the ``standing`` leases (active, not under notice) whose end lets a
    request of ``size`` GPUs in ``queue`` be placed (``fits`` says whether it could be, were
    some gone), every other queue keeping its deserved quota; none when no such set exists.
    ``waiting`` is GPUs asked for per queue by requests waiting (this one included)."""
    usage = queues.usage(standing)
    candidates = victims(queues, queue, cls, size, standing, usage, capacity, waiting)
    return preemption.fewest(
        candidates,
        fits,
        lambda leases: keep_deserved(queues, queue, leases, usage, capacity),
    )


def victims(
    queues: Queues,
    queue: Queue,
    cls: PriorityClass,
    size: float,
    leases: Iterable[Lease],
    usage: Mapping[str, float],
    capacity: float,
    waiting: Mapping[str, float],
) -> list[Lease]:
    """Leases a request may take, in the order to try them (most over its share, cheapest,
    newest first). Each alone leaves its queue its deserved quota; a set of them is checked
    with :func:`keep_deserved`.

    ``leases`` are the active ones not already under notice and ``usage`` what they hold per
    queue (:meth:`Queues.usage`); ``waiting`` is GPUs asked for by queue, this request
    included.
    """
    leases = list(leases)
    fair = queues.fair_shares(capacity, queues.demand(leases, waiting))
    mine = {q.name for q in queues.chain(queue.name)}
    reclaiming = all(
        usage.get(q.name, 0.0) + size <= fair.get(q.name, 0.0) + EPSILON
        for q in queues.chain(queue.name)
    )
    reclaim: list[tuple[float, int, float, Lease]] = []
    preempt: list[tuple[int, float, Lease]] = []
    for lease in leases:
        cls_v = priority_class(lease.priority)
        if not cls_v.preemptible:
            continue
        owner = queues.chain_or_default(lease.queue)
        if owner[0].name == queue.name:
            if cls_v.value < cls.value:
                preempt.append((cls_v.value, -lease.created_at, lease))
            continue
        if not reclaiming:
            continue
        theirs = [q for q in owner if q.name not in mine]
        if all(
            usage.get(q.name, 0.0) > fair.get(q.name, 0.0) + EPSILON for q in theirs
        ) and keep_deserved(queues, queue, [lease], usage, capacity):
            over = usage.get(owner[0].name, 0.0) - fair.get(owner[0].name, 0.0)
            reclaim.append((-over, cls_v.value, -lease.created_at, lease))
    return [lease for *_, lease in sorted(reclaim, key=lambda r: r[:3])] + [
        lease for *_, lease in sorted(preempt, key=lambda p: p[:2])
    ]


def keep_deserved(
    queues: Queues,
    queue: Queue,
    taken: Iterable[Lease],
    usage: Mapping[str, float],
    capacity: float,
) -> bool:
    """Whether every other queue (and department) keeps its deserved quota when ``taken`` end
    (``usage``: GPUs held per queue before)."""
    mine = {q.name for q in queues.chain(queue.name)}
    left = dict(usage)
    for lease in taken:
        for q in queues.chain_or_default(lease.queue):
            if q.name not in mine:
                left[q.name] = left.get(q.name, 0.0) - lease_size(lease)
    return all(
        left[name] >= queues.deserved(queues.resolve(name), capacity) - EPSILON
        for name in left
        if name not in mine and left[name] != usage.get(name)
    )
