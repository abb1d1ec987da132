"""Queues: what each team deserves, and its fair share of the rest.

Pure: no I/O, no clock. Amounts are GPUs (a lease of half a GPU counts 0.5). The rules are
written down in docs/scheduling.md; in short, after KAI-Scheduler, each queue first gets its
deserved quota (up to what it asks for), then idle GPUs are divided among queues that want more
in proportion to their over-quota weights, never past their limit; higher-priority queues are
served first at each step. A department (parent) queue's share is divided among its projects
the same way. Whose leases a request may take is :mod:`radium.pool.core.reclaim`'s.
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping

from radium.errors import InvalidRequestError
from radium.pool.model import (
    DEFAULT_PRIORITY,
    DEFAULT_QUEUE,
    PRIORITY_CLASSES,
    Lease,
    PriorityClass,
    Queue,
)

__all__ = [
    "EPSILON",
    "Queues",
    "checked",
    "lease_size",
    "priority_class",
]

EPSILON = 1e-9


def priority_class(name: str) -> PriorityClass:
    """The priority class of this name (the default for none); refused when unknown."""
    found = PRIORITY_CLASSES.get(name or DEFAULT_PRIORITY)
    if found is None:
        raise InvalidRequestError(
            f"unknown priority class {name!r}",
            hint=f"use one of {', '.join(sorted(PRIORITY_CLASSES))}",
        )
    return found


def lease_size(lease: Lease) -> float:
    """The GPUs a lease holds: its share of each of its devices, summed."""
    return lease.fraction * len(lease.devices)


class Queues:
    """The configured queues plus the implicit ``default`` one, and the share arithmetic."""

    def __init__(self, queues: Iterable[Queue] = ()) -> None:
        self.by_name = {q.name: q for q in queues}
        #: name -> its chain: every lease asks several times, and the queues never change
        #: (new definitions are a new Queues)
        self._chains: dict[str, tuple[Queue, ...]] = {}

    def resolve(self, name: str) -> Queue:
        """The queue a request names ("" is the default queue); an error when unknown."""
        name = name or DEFAULT_QUEUE
        found = self.by_name.get(name)
        if found is not None:
            return found
        if name == DEFAULT_QUEUE:
            return Queue(DEFAULT_QUEUE)
        raise InvalidRequestError(
            f"no queue {name!r} in this pool",
            hint="see `radium queues ls`, or ask an admin to `radium queues add` it",
        )

    def all(self) -> list[Queue]:
        known = dict(self.by_name)
        known.setdefault(DEFAULT_QUEUE, Queue(DEFAULT_QUEUE))
        return list(known.values())

    def children(self, parent: str) -> list[Queue]:
        return [q for q in self.all() if q.parent == parent]

    def chain(self, name: str) -> tuple[Queue, ...]:
        """The queue and its ancestors, nearest first."""
        found = self._chains.get(name)
        if found is None:
            out: list[Queue] = []
            queue: Queue | None = self.resolve(name)
            while queue is not None and queue not in out:
                out.append(queue)
                queue = self.by_name.get(queue.parent) if queue.parent else None
            found = self._chains[name] = tuple(out)
        return found

    def deserved(self, queue: Queue, capacity: float) -> float:
        """An unconfigured default queue deserves what no top-level queue was promised."""
        if queue.name == DEFAULT_QUEUE and DEFAULT_QUEUE not in self.by_name:
            promised = sum(q.deserved for q in self.by_name.values() if not q.parent)
            return max(0.0, capacity - promised)
        return queue.deserved

    def usage(
        self, leases: Iterable[Lease], *, preemptible: bool | None = None
    ) -> dict[str, float]:
        """GPUs held per queue, each counted in its ancestors too. ``preemptible`` filters."""
        used: dict[str, float] = {}
        for lease in leases:
            if (
                preemptible is not None
                and priority_class(lease.priority).preemptible != preemptible
            ):
                continue
            for queue in self.chain_or_default(lease.queue):
                used[queue.name] = used.get(queue.name, 0.0) + lease_size(lease)
        return used

    def owner(self, lease: Lease) -> Queue:
        return self.chain_or_default(lease.queue)[0]

    def chain_or_default(self, name: str) -> tuple[Queue, ...]:
        """:meth:`chain`, or the default queue's for a queue no longer defined."""
        try:
            return self.chain(name)
        except InvalidRequestError:  # a lease whose queue was removed counts as default's
            return self.chain(DEFAULT_QUEUE)

    def demand(self, leases: Iterable[Lease], waiting: Mapping[str, float]) -> dict[str, float]:
        """GPUs each queue asks for: what its leases hold plus what its requests wait for."""
        asked = dict(waiting)
        for lease in leases:
            name = self.owner(lease).name
            asked[name] = asked.get(name, 0.0) + lease_size(lease)
        return asked

    def fair_shares(self, capacity: float, demand: Mapping[str, float]) -> dict[str, float]:
        """GPUs each queue (and department) is entitled to now, given what each asks for."""
        wanted: dict[str, float] = {}
        for name, amount in demand.items():
            for queue in self.chain_or_default(name):
                wanted[queue.name] = wanted.get(queue.name, 0.0) + amount
        shares: dict[str, float] = {}
        self._divide(capacity, "", capacity, wanted, shares)
        return shares

    def _divide(
        self,
        total: float,
        parent: str,
        capacity: float,
        wanted: Mapping[str, float],
        shares: dict[str, float],
    ) -> None:
        members = self.children(parent)
        caps = {
            q.name: min(wanted.get(q.name, 0.0), q.limit if q.limit >= 0 else math.inf)
            for q in members
        }
        given = {q.name: 0.0 for q in members}
        remaining = total
        for priority in sorted({q.priority for q in members}, reverse=True):
            group = [q for q in members if q.priority == priority]
            asks = {q.name: min(self.deserved(q, capacity), caps[q.name]) for q in group}
            scale = min(1.0, remaining / sum(asks.values())) if sum(asks.values()) else 0.0
            for name, ask in asks.items():
                given[name] += ask * scale
                remaining -= ask * scale
        for priority in sorted({q.priority for q in members}, reverse=True):
            group = [q for q in members if q.priority == priority and q.weight > 0]
            remaining = _water_fill(remaining, group, caps, given)
        for queue in members:
            shares[queue.name] = given[queue.name]
            self._divide(given[queue.name], queue.name, capacity, wanted, shares)


def _water_fill(
    remaining: float, group: list[Queue], caps: Mapping[str, float], given: dict[str, float]
) -> float:
    """Hand out ``remaining`` by weight to queues under their cap; what is left over."""
    while remaining > EPSILON:
        open_ = [q for q in group if given[q.name] < caps[q.name] - EPSILON]
        if not open_:
            break
        weights = sum(q.weight for q in open_)
        handed = 0.0
        for queue in open_:
            give = min(caps[queue.name] - given[queue.name], remaining * queue.weight / weights)
            given[queue.name] += give
            handed += give
        remaining -= handed
        if handed <= EPSILON:
            break
    return remaining


def checked(queue: Queue, existing: Mapping[str, Queue]) -> Queue:
    """The queue if it is well formed and fits the tree; InvalidRequestError saying why not."""
    if (
        not queue.name
        or len(queue.name) > 253
        or not queue.name.replace("-", "").replace("_", "").replace(".", "").isalnum()
    ):
        raise InvalidRequestError(
            f"queue name {queue.name!r} must be 1-253 letters, digits, '-', '_' or '.'"
        )
    for what, value in (("deserved", queue.deserved), ("weight", queue.weight)):
        if not (math.isfinite(value) and value >= 0):
            raise InvalidRequestError(f"queue {what} must be a number of GPUs >= 0, got {value}")
    if not (math.isfinite(queue.limit) and (queue.limit >= 0 or queue.limit == -1)):
        raise InvalidRequestError(
            f"queue limit must be >= 0 GPUs, or -1 for none, got {queue.limit}"
        )
    if queue.limit >= 0 and queue.deserved > queue.limit:
        raise InvalidRequestError(
            f"queue {queue.name!r} cannot deserve {queue.deserved:g} GPUs"
            f" with a limit of {queue.limit:g}"
        )
    if queue.parent:
        ancestor: Queue | None = existing.get(queue.parent)
        if ancestor is None:
            raise InvalidRequestError(f"no parent queue {queue.parent!r}; add it first")
        while ancestor is not None:
            if ancestor.name == queue.name:
                raise InvalidRequestError(f"queue {queue.name!r} cannot be its own ancestor")
            ancestor = existing.get(ancestor.parent) if ancestor.parent else None
    return queue
