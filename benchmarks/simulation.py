"""A discrete-event replay of pods through the pool's own scheduling code (see sharing.py).

Each *cell* is a ``PoolState`` with the pool's ``WaitingRoom`` in front of it, driven as the
pool's service drives them: a request is granted at once when nobody waits, otherwise it
joins the room; every end of a lease (a departure, or a preempted lease reaped when its grace
is over) is followed by ``WaitingRoom.serve``, which grants in the pool's order and reclaims
for queues that are owed their share. Placement, quotas, fair shares and the choice of
victims are the pool's; this module only keeps the clock, the events and the tallies. The
room's futures belong to an event loop that never runs: the room only sets and reads them.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from dataclasses import dataclass, field
from functools import partial

from radium.errors import CapacityError
from radium.pool.core import queues
from radium.pool.core.state import PoolState
from radium.pool.core.waiting import WaitingRoom
from radium.pool.model import Lease, Request

#: Event kinds, in the order they are handled at one instant: capacity is freed first.
DEPART, REAP, ARRIVE = 0, 1, 2


@dataclass(eq=False)
class Job:
    """One pod of the trace in one run: its request (holder = its name) and its progress."""

    name: str
    cell: int
    request: Request
    #: GPUs it uses (its fraction), whatever it holds.
    share: float
    arrival: float
    #: Seconds of running still to do.
    remaining: float
    lease: str = ""
    started: float = 0.0
    first_placed: float = -1.0
    #: Since when it waits at the head of its queue while entitled to it (-1: not so).
    owed_since: float = -1.0
    preemptions: int = 0


@dataclass
class Metrics:
    capacity: float
    window: float
    #: GPU-seconds, within the window, used by running pods (their fractions) and held.
    busy: float = 0.0
    held: float = 0.0
    delays: list[float] = field(default_factory=list)
    owed_waits: list[float] = field(default_factory=list)
    preemptions: int = 0
    preempted_pods: int = 0
    allocate_s: list[float] = field(default_factory=list)
    serve_s: list[float] = field(default_factory=list)
    makespan: float = 0.0
    never_placed: int = 0

    @property
    def busy_share(self) -> float:
        return self.busy / (self.capacity * self.window)

    @property
    def held_share(self) -> float:
        return self.held / (self.capacity * self.window)


class Simulation:
    def __init__(self, cells: list[PoolState], grace: float, window: float) -> None:
        self.cells = cells
        self.loop = asyncio.new_event_loop()
        self.rooms = [
            WaitingRoom(state, partial(self._grant, i), self._preempted, self._clock, grace)
            for i, state in enumerate(cells)
        ]
        self.now = 0.0
        self.events: list[tuple[float, int, int, Job, str]] = []
        self.jobs: dict[str, Job] = {}
        self.order = itertools.count()
        self.using = self.holding = 0.0
        capacity = sum(state.capacity() for state in cells)
        self.metrics = Metrics(capacity, window)

    def _clock(self) -> float:
        return self.now

    def _push(self, at: float, kind: int, job: Job, lease: str = "") -> None:
        heapq.heappush(self.events, (at, kind, next(self.order), job, lease))

    def run(self, jobs: list[Job]) -> Metrics:
        for job in jobs:
            self.jobs[job.name] = job
            self._push(job.arrival, ARRIVE, job)
        while self.events:
            at, kind, _, job, lease_id = heapq.heappop(self.events)
            self._advance(at)
            if kind == ARRIVE:
                self._ask(job)
            elif kind == DEPART:
                self._depart(job, lease_id)
            else:
                self._reap(job.cell)
        self.metrics.makespan = self.now
        self.metrics.never_placed = sum(
            1 for room in self.rooms for w in room.waiters if not w.future.done()
        )
        self.metrics.preempted_pods = sum(1 for job in jobs if job.preemptions)
        self.loop.close()
        return self.metrics

    def _advance(self, at: float) -> None:
        window = self.metrics.window
        span = max(0.0, min(at, window) - min(self.now, window))
        self.metrics.busy += self.using * span
        self.metrics.held += self.holding * span
        self.now = at

    # -- what the pool's service does ---------------------------------------------------------

    def _ask(self, job: Job) -> None:
        """An Allocate call that waits as long as it takes."""
        room = self.rooms[job.cell]
        if not len(room):
            try:
                self._grant(job.cell, job.request)
                return
            except CapacityError:
                pass
        room.add(job.request, self.loop.create_future())
        self._serve(job.cell)

    def _grant(self, cell: int, request: Request) -> Lease:
        began = time.perf_counter()
        try:
            lease = self.cells[cell].allocate(request, self.now)
        finally:
            self.metrics.allocate_s.append(time.perf_counter() - began)
        job = self.jobs[request.holder]
        job.lease, job.started = lease.id, self.now
        if job.first_placed < 0:
            job.first_placed = self.now
            self.metrics.delays.append(self.now - job.arrival)
        if job.owed_since >= 0:
            self.metrics.owed_waits.append(self.now - job.owed_since)
            job.owed_since = -1.0
        self.using += job.share
        self.holding += queues.lease_size(lease)
        self._push(self.now + job.remaining, DEPART, job, lease.id)
        return lease

    def _preempted(self, leases: list[Lease]) -> None:
        for lease in leases:
            self.metrics.preemptions += 1
            # reap ends leases whose expiry is strictly past
            self._push(lease.expires_at + 1e-3, REAP, self.jobs[lease.holder])

    def _serve(self, cell: int) -> None:
        room, state = self.rooms[cell], self.cells[cell]
        began = time.perf_counter()
        room.serve()
        self.metrics.serve_s.append(time.perf_counter() - began)
        capacity = state.capacity()
        for waiter in room.heads():
            job = self.jobs[waiter.request.holder]
            if job.owed_since >= 0:
                continue
            queue = state.queues.resolve(waiter.queue)
            deserved = state.queues.deserved(queue, capacity)
            if state.used[queue.name] + state.size_of(waiter.request) <= deserved + 1e-9:
                job.owed_since = self.now

    def _stop(self, job: Job, lease: Lease) -> None:
        self.using -= job.share
        self.holding -= queues.lease_size(lease)
        job.lease = ""

    def _depart(self, job: Job, lease_id: str) -> None:
        state = self.cells[job.cell]
        if job.lease != lease_id or lease_id not in state.leases:
            return  # preempted before it was done: it departs from its next lease
        lease = state.release(lease_id, self.now)
        assert lease is not None
        self._stop(job, lease)
        if len(self.rooms[job.cell]):
            self._serve(job.cell)

    def _reap(self, cell: int) -> None:
        ended = self.cells[cell].reap(self.now)
        if not ended:
            return
        again = []
        for lease in ended:
            job = self.jobs[lease.holder]
            self._stop(job, lease)
            job.remaining -= self.now - job.started
            job.preemptions += 1
            again.append(job)
        if len(self.rooms[cell]):
            self._serve(cell)
        for job in again:  # its owner asks again, for the work it had left
            self._ask(job)
