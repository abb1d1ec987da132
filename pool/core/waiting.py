"""Requests waiting for capacity: served fairly across queues, in order within one, and
given back their queue's share by reclaiming when they are entitled to it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Callable

from radium.errors import CapacityError, RadiumError
from radium.pool.core import queues
from radium.pool.core.state import PoolState
from radium.pool.model import Lease, Request

__all__ = ["Waiter", "WaitingRoom"]


@dataclass
class Waiter:
    """One request waiting for capacity, and the future its caller awaits."""

    request: Request
    future: asyncio.Future[Lease]
    queue: str
    #: Not preemptible: it waits on its queue's deserved quota, not on idle GPUs.
    firm: bool
    #: Leases put under notice for this request; no more are taken while any is still on.
    victims: set[str] = field(default_factory=set)


class WaitingRoom:
    """The requests waiting for capacity: served when capacity frees up, fairly across queues and
    in order within one, and given what their queue deserves by reclaiming."""

    def __init__(
        self,
        state: PoolState,
        grant: Callable[[Request], Lease],
        preempted: Callable[[list[Lease]], None],
        clock: Callable[[], float],
        grace: float,
    ) -> None:
        self.state = state
        self.grant = grant
        self.preempted = preempted
        self.clock = clock
        self.grace = grace
        self.waiters: list[Waiter] = []

    def __len__(self) -> int:
        """Requests still waiting: one that was served, refused or gave up is not, though it
        stays in the list until the next :meth:`heads`."""
        return len(self.pending())

    def add(self, request: Request, future: asyncio.Future[Lease]) -> None:
        queue = self.state.queues.resolve(request.queue).name
        firm = not queues.priority_class(request.priority).preemptible
        self.waiters.append(Waiter(request, future, queue, firm))

    def pending(self) -> list[Waiter]:
        return [w for w in self.waiters if not w.future.done()]

    def waiting(self) -> dict[str, float]:
        """GPUs asked for per queue by the requests still waiting."""
        asked: dict[str, float] = {}
        for waiter in self.waiters:
            if not waiter.future.done():
                asked[waiter.queue] = asked.get(waiter.queue, 0.0) + self.state.size_of(
                    waiter.request
                )
        return asked

    def heads(self) -> list[Waiter]:
        """The first pending request of each queue's two lines, the queue furthest below its
        due first. Non-preemptible requests wait in one line, preemptible ones in the other:
        each waits on something else (the quota; idle GPUs), so neither blocks the other."""
        self.waiters = [w for w in self.waiters if not w.future.done()]
        firsts: dict[tuple[str, bool], Waiter] = {}
        for waiter in self.waiters:
            firsts.setdefault((waiter.queue, waiter.firm), waiter)

        def due(waiter: Waiter) -> tuple[int, float]:
            queue = self.state.queues.resolve(waiter.queue)
            deserved = self.state.queues.deserved(queue, self.state.capacity())
            return (-queue.priority, self.state.used[queue.name] / max(deserved, 1e-9))

        return sorted(firsts.values(), key=due)

    def serve(self) -> None:
        """Grant what fits now, head by head; then reclaim for heads that are owed."""
        served = True
        while served:
            served = False
            for waiter in self.heads():
                try:
                    lease = self.grant(waiter.request)
                except CapacityError:
                    continue
                except RadiumError as exc:
                    waiter.future.set_exception(exc)
                else:
                    waiter.future.set_result(lease)
                served = True
                break
        self._reclaim()

    def _reclaim(self) -> None:
        waiting = self.waiting()  # no request is served here: it stays the same
        for waiter in self.heads():
            if any(lease_id in self.state.leases for lease_id in waiter.victims):
                continue  # its notices are running; their end serves it
            try:
                victims = self.state.reclaim(waiter.request, self.clock(), self.grace, waiting)
            except RadiumError:
                continue  # over its limit or quota: it waits for its own leases to end
            if victims:
                waiter.victims = {lease.id for lease in victims}
                self.preempted(victims)
