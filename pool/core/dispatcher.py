"""The pool's coordinator: its state, the requests waiting for capacity, and each acceptor's
feed of assignments, on one asyncio loop. No gRPC and no store of its own: the lease carriers
(:mod:`radium.pool.leases`) and the servicers (:mod:`radium.pool.api`) drive it."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Protocol

from radium.configtree import PoolConfig
from radium.pool.core import convert
from radium.pool.core.images import Images
from radium.pool.core.state import PoolState
from radium.pool.core.waiting import WaitingRoom
from radium.pool.model import Lease, Queue, Request
from radium.pool.store.commits import Commits, Immediate
from radium.proto import pool_pb2 as pb

__all__ = ["Dispatcher", "Feed", "Observer", "QueueFigures", "Unobserved"]

log = logging.getLogger(__name__)
#: Ended leases stay listed (`radium leases --all`) this long, in seconds (the newest
#: [pool] ended_kept of them), unless [pool] ended_retention says otherwise.
ENDED_RETENTION = PoolConfig.ended_retention
#: How often the pool forgets ended leases past the retention and (etcd) compacts the history
#: older than the last time: a minute of churn is what etcd keeps besides its keys.
PRUNE_EVERY = 60.0


class Observer(Protocol):
    """Told of what the pool does, as it does it (its metrics)."""

    def allocation(self, error: BaseException | None, waited: bool, seconds: float) -> None: ...

    def lease_ended(self, state: str) -> None: ...


class Unobserved:
    """An observer that notes nothing (a pool without metrics, tests)."""

    def allocation(self, error: BaseException | None, waited: bool, seconds: float) -> None:
        pass

    def lease_ended(self, state: str) -> None:
        pass


@dataclass(frozen=True)
class QueueFigures:
    """A queue as `radium queues ls` and the metrics show it, in GPUs."""

    queue: Queue
    deserved: float
    allocated: float
    fair_share: float
    leases: int
    waiting: int

    @property
    def borrowed(self) -> float:
        """Held beyond the deserved quota: preemptible, reclaimable."""
        return max(0.0, self.allocated - self.deserved)


class Dispatcher:
    """State plus what the services share: waiting requests and acceptor watch streams."""

    def __init__(
        self,
        state: PoolState,
        clock: Callable[[], float] = time.time,
        grace: float = 30.0,
        observer: Observer | None = None,
        commits: Commits | None = None,
    ) -> None:
        self.state = state
        self.clock = clock
        self.commits: Commits = commits or Immediate()
        self.observer: Observer = observer or Unobserved()
        self.waiters = WaitingRoom(state, self.grant, self.preempted, clock, grace)
        self.watchers: dict[str, Feed] = {}
        self.images = Images(state.store)

    def connected(self) -> list[str]:
        """Acceptors that are up and following their assignments."""
        return [n for n in sorted(self.state.acceptors) if self.is_connected(n)]

    def is_connected(self, name: str) -> bool:
        acceptor = self.state.acceptors.get(name)
        feed = self.watchers.get(name)
        return acceptor is not None and acceptor.serving and feed is not None and feed.followed

    def tell(self, names: list[str], kind: pb.Assignment.Kind, image: str) -> None:
        for name in names:
            self.watchers[name].put_nowait(pb.Assignment(kind=kind, image=image))

    def notify(
        self, kind: pb.Assignment.Kind, leases: list[Lease], shown: pb.Lease | None = None
    ) -> None:
        """Tell each lease's acceptor; ``shown``: the one lease, already converted."""
        for lease in leases:
            queue = self.watchers.get(lease.acceptor)
            if queue is None:
                continue
            if kind == pb.Assignment.REVOKED:  # named by its id: the acceptor needs no more
                queue.put_nowait(pb.Assignment(kind=kind, lease=pb.Lease(id=lease.id)))
            else:
                queue.put_nowait(
                    pb.Assignment(kind=kind, lease=shown or convert.lease_to_pb(lease))
                )

    def ended(self, leases: list[Lease]) -> None:
        """Tell acceptors, then give the freed capacity to waiting requests, in order."""
        for lease in leases:
            self.observer.lease_ended(lease.state)
        self.notify(pb.Assignment.REVOKED, leases)
        self.serve_waiters()

    def serve_waiters(self) -> None:
        self.waiters.serve()

    def queue_figures(self) -> list[QueueFigures]:
        """Every queue, parents' children after them, with what it deserves, holds and waits
        for, and its fair share now."""
        state = self.state
        capacity = state.capacity()
        fair = state.queues.fair_shares(
            capacity, state.queues.demand(state.leases.values(), self.waiters.waiting())
        )
        leases = Counter(state.queues.owner(lease).name for lease in state.leases.values())
        waiting = Counter(w.queue for w in self.waiters.pending())
        return [
            QueueFigures(
                q,
                state.queues.deserved(q, capacity),
                state.used[q.name],
                fair.get(q.name, 0.0),
                leases[q.name],
                waiting[q.name],
            )
            for q in sorted(state.queues.all(), key=lambda q: (q.parent, q.name))
        ]

    def preempted(self, leases: list[Lease]) -> None:
        self.notify(pb.Assignment.PREEMPTED, leases)

    def grant(self, request: Request) -> Lease:
        return self.grant_shown(request)[0]

    def grant_shown(self, request: Request) -> tuple[Lease, pb.Lease]:
        """Grant ``request``, and tell its acceptor: the lease, and as the wire shows it."""
        lease = self.state.allocate(request, self.clock())
        shown = convert.lease_to_pb(lease)
        self.notify(pb.Assignment.GRANTED, [lease], shown)
        return lease, shown

    async def reap_forever(self, interval: float, retention: float = ENDED_RETENTION) -> None:
        last_prune = 0.0
        while True:
            await asyncio.sleep(interval)
            now = self.clock()
            if now - last_prune > PRUNE_EVERY:
                last_prune = now
                try:
                    pruned = self.state.store.prune(now - retention)
                except Exception:  # reaping below must not wait for it
                    log.exception("forgetting ended leases failed")
                else:
                    if pruned:
                        log.info("forgot %d ended leases", pruned)
            try:
                ended = self.state.reap(now)
            except Exception:  # a broken store must not kill the loop; log and retry
                log.exception("reaping leases failed")
                continue
            if ended:
                self.ended(ended)


class Feed(asyncio.Queue[pb.Assignment]):
    """One acceptor's assignments, made when it registers and followed by its next ``Watch``.

    The registration's answer lists the leases granted before it, the feed keeps those granted
    after it: a grant made before the acceptor's stream is open still reaches it (it was lost,
    and the lease's holder was refused at the data plane for a lease its acceptor never saw).
    """

    followed = False
