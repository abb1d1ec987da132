"""The pool's working state: acceptors, devices, active leases; every change written through.

Single-threaded by design (the server runs it on one asyncio loop), which is what makes
allocation atomic: a device is never given twice.
"""

from __future__ import annotations

import functools
import logging
import secrets
from collections import defaultdict
from typing import Iterable, Mapping

from radium.errors import LeaseNotFoundError
from radium.pool.core import queues, quota, scheduler
from radium.pool.core.fgd import FGD
from radium.pool.core.placement import Placer, Policy
from radium.pool.core.queues import Queues
from radium.pool.core.reclaim import to_take
from radium.pool.model import (
    ACTIVE,
    EXPIRED,
    PREEMPTED,
    RELEASED,
    REVOKED,
    AcceptorState,
    DeviceState,
    Lease,
    Request,
    Usage,
)
from radium.pool.store.base import Store

__all__ = ["PoolState"]

log = logging.getLogger(__name__)


class PoolState:
    """The acceptors, their devices and the active leases in memory, each change written through
    ``store`` before it is kept; placement and queues over them."""

    def __init__(
        self,
        store: Store,
        *,
        lease_ttl: float,
        heartbeat_timeout: float,
        now: float,
        policy: Policy | None = None,
    ) -> None:
        self.store = store
        self.placer = Placer(policy or FGD())
        self.lease_ttl = lease_ttl
        self.heartbeat_timeout = heartbeat_timeout
        self.queues = Queues(store.load_queues())
        #: GPUs held per queue (ancestors included), all and non-preemptible: kept as leases
        #: come and go, because a quota check must not walk every lease.
        self.used: defaultdict[str, float] = defaultdict(float)
        self.used_firm: defaultdict[str, float] = defaultdict(float)
        acceptors, leases = store.load()
        self.acceptors = {a.name: a for a in acceptors}
        self.leases: dict[str, Lease] = {}
        # A restart must not cost anyone their lease or acceptor: both get a fresh grace period.
        store.extend_active(now + lease_ttl)
        for acceptor in self.acceptors.values():
            acceptor.last_heartbeat = now
        for lease in leases:
            if not lease.preempted_at:  # under notice: the notice stands
                lease.expires_at = max(lease.expires_at, now + lease_ttl)
            self._occupy(lease)
            self.leases[lease.id] = lease
        for acceptor in self.acceptors.values():
            self.placer.update(acceptor)
        log.info("loaded %d acceptors, %d active leases", len(self.acceptors), len(self.leases))

    def _count(self, lease: Lease, sign: int) -> None:
        firm = not queues.priority_class(lease.priority).preemptible
        size = sign * queues.lease_size(lease)
        for queue in self.queues.chain(self.queues.owner(lease).name):
            self.used[queue.name] += size
            if firm:
                self.used_firm[queue.name] += size

    def set_queues(self, configured: Queues) -> None:
        """New queue definitions (usage is recounted: parents may have changed)."""
        self.queues = configured
        self.used.clear()
        self.used_firm.clear()
        for lease in self.leases.values():
            self._count(lease, +1)

    def _occupy(self, lease: Lease) -> None:
        self._count(lease, +1)
        acceptor = self.acceptors.get(lease.acceptor)
        for device_id, mib in lease.devices.items():
            state = acceptor.devices.get(device_id) if acceptor else None
            if state is not None:
                state.used_mib += mib
                state.holders[lease.id] = mib
        if acceptor is not None:
            acceptor.cpu_used += lease.cpu_milli
            self.placer.update(acceptor)

    def _vacate(self, lease: Lease) -> None:
        self._count(lease, -1)
        acceptor = self.acceptors.get(lease.acceptor)
        for device_id in lease.devices:
            state = acceptor.devices.get(device_id) if acceptor else None
            if state is not None and lease.id in state.holders:
                state.used_mib -= state.holders.pop(lease.id)
        if acceptor is not None:
            acceptor.cpu_used = max(0, acceptor.cpu_used - lease.cpu_milli)
            self.placer.update(acceptor)

    def capacity(self) -> float:
        """GPUs on acceptors that can take leases."""
        return float(sum(len(a.devices) for a in self.placer.acceptors.values()))

    def size_of(self, request: Request) -> float:
        """GPUs a request will hold (memory counts against the largest device: a floor)."""
        if request.gpus or request.fraction:
            return float(request.gpus or request.fraction)
        largest = max((s.device.memory_mib for _, s in self.device_states()), default=0)
        return request.memory_mib / largest if largest else 0.0

    def allocate(self, request: Request, now: float) -> Lease:
        queue = self.queues.resolve(request.queue)
        cls = queues.priority_class(request.priority)
        placement = scheduler.place(request, self.acceptors.values(), self.placer)
        size = placement.fraction * len(placement.devices)
        quota.check(self.queues, queue, cls, size, self.used, self.used_firm, self.capacity)
        acceptor = self.acceptors[placement.acceptor]
        ttl = request.ttl or self.lease_ttl
        lease = Lease(
            id=f"l-{secrets.token_hex(8)}",
            acceptor=acceptor.name,
            data_address=acceptor.data_address,
            devices=dict(placement.devices),
            fraction=placement.fraction,
            holder=request.holder,
            queue=queue.name,
            priority=cls.name,
            credential=secrets.token_urlsafe(32),
            ttl=ttl,
            expires_at=now + ttl,
            created_at=now,
            image=request.image,
            worker=request.worker,
            cpu_milli=request.cpu_milli,
        )
        self.store.add_lease(lease)
        self._occupy(lease)
        self.leases[lease.id] = lease
        return lease

    def keep_alive(self, lease_id: str, now: float) -> float:
        lease = self.leases.get(lease_id)
        if lease is None:
            raise LeaseNotFoundError(f"lease {lease_id} is not active", hint="allocate a new one")
        if not lease.preempted_at:  # under notice, the lease ends when its grace does
            lease.expires_at = now + lease.ttl
        return lease.expires_at

    def end(self, leases: Iterable[Lease], state: str, now: float) -> list[Lease]:
        ended = [lease for lease in leases if lease.id in self.leases]
        for lease in ended:
            lease.state, lease.ended_at = state, now
        if ended:
            self.store.end_leases(ended)
        for lease in ended:
            self._vacate(lease)
            del self.leases[lease.id]
            # A release is routine (thousands a second on a busy pool); other ends are news.
            log.log(
                logging.DEBUG if state == RELEASED else logging.INFO,
                "lease %s %s (holder %s)",
                lease.id,
                state,
                lease.holder,
            )
        return ended

    def release(self, lease_id: str, now: float) -> Lease | None:
        """The released lease, or None when it had already ended (release is idempotent)."""
        lease = self.leases.get(lease_id)
        return self.end([lease], RELEASED, now)[0] if lease else None

    def register(self, acceptor: AcceptorState, now: float) -> tuple[list[Lease], list[Lease]]:
        """(active leases on it, leases revoked because their devices disappeared)."""
        old = self.acceptors.get(acceptor.name)
        acceptor.up, acceptor.last_heartbeat = True, now
        self.store.save_acceptor(acceptor)
        self.acceptors[acceptor.name] = acceptor
        self.placer.update(acceptor)
        mine = [lease for lease in self.leases.values() if lease.acceptor == acceptor.name]
        lost = [lease for lease in mine if not set(lease.devices) <= set(acceptor.devices)]
        revoked = self.end(lost, REVOKED, now)
        for lease in mine:
            if lease.state == ACTIVE:
                lease.data_address = acceptor.data_address
                self._occupy(lease)
        log.info(
            "acceptor %s registered (%d devices)%s",
            acceptor.name,
            len(acceptor.devices),
            " again" if old else "",
        )
        return [lease for lease in mine if lease.state == ACTIVE], revoked

    def heartbeat(self, name: str, now: float, usage: Iterable[tuple[str, Usage]] = ()) -> bool:
        """Note that the acceptor lives, with what its leases' workers use."""
        acceptor = self.acceptors.get(name)
        if acceptor is None or not acceptor.serving:
            return False  # it must register (again) first
        acceptor.last_heartbeat = now
        for lease_id, used in usage:
            lease = self.leases.get(lease_id)
            if lease is not None and lease.acceptor == name:
                lease.usage = used
        return True

    def reap(self, now: float) -> list[Lease]:
        """End expired leases and those of acceptors that stopped heartbeating."""
        due = [lease for lease in self.leases.values() if lease.expires_at < now]
        ended = self.end([x for x in due if x.preempted_at], PREEMPTED, now)
        ended += self.end([x for x in due if not x.preempted_at], EXPIRED, now)
        for acceptor in self.acceptors.values():
            if acceptor.up and now - acceptor.last_heartbeat > self.heartbeat_timeout:
                acceptor.up = False
                self.placer.forget(acceptor.name)
                self.store.set_up(acceptor.name, False)
                log.warning("acceptor %s missed its heartbeats: marked down", acceptor.name)
                mine = [lease for lease in self.leases.values() if lease.acceptor == acceptor.name]
                ended += self.end(mine, REVOKED, now)
        return ended

    def reclaim(
        self, request: Request, now: float, grace: float, waiting: Mapping[str, float]
    ) -> list[Lease]:
        """Put under notice the fewest leases whose end lets ``request`` be placed, by the
        rules of :mod:`radium.pool.core.reclaim`; none when no such set exists. ``waiting`` is
        GPUs asked for per queue by requests waiting (this one included)."""
        queue = self.queues.resolve(request.queue)
        cls = queues.priority_class(request.priority)
        size = self.size_of(request)
        quota.check(self.queues, queue, cls, size, self.used, self.used_firm, self.capacity)
        standing = [lease for lease in self.leases.values() if not lease.preempted_at]
        fits = functools.partial(self._fits, request)
        taken = to_take(self.queues, queue, cls, size, standing, self.capacity(), waiting, fits)
        if not taken:
            return []
        for lease in taken:
            lease.preempted_at, lease.preempted_for = now, queue.name
            lease.expires_at = min(lease.expires_at, now + grace)
        self.store.mark_preempted(taken)
        for lease in taken:
            log.info(
                "lease %s (queue %s) preempted for queue %s: ends in %gs",
                lease.id,
                lease.queue,
                queue.name,
                grace,
            )
        return taken

    def _fits(self, request: Request, without: list[Lease]) -> bool:
        """Whether ``request`` could be placed were the leases ``without`` gone."""
        for lease in without:
            self._vacate(lease)
        try:  # the placer alone: no error message to build for each set tried
            return self.placer.place(request) is not None
        finally:
            for lease in without:
                self._occupy(lease)

    def device_states(self) -> list[tuple[AcceptorState, DeviceState]]:
        return [(a, s) for a in self.acceptors.values() for s in a.devices.values()]
