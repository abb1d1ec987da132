"""The pool's working state: acceptors, devices, active leases; every change written through.

Single-threaded by design (the server runs it on one asyncio loop), which is what makes
allocation atomic: a device is never given twice.
"""

from __future__ import annotations

import logging
import secrets
from typing import Iterable

from radium.errors import LeaseNotFoundError
from radium.pool import scheduler
from radium.pool.model import (
    ACTIVE,
    EXPIRED,
    RELEASED,
    REVOKED,
    AcceptorState,
    DeviceState,
    Lease,
    Request,
)
from radium.pool.store import Store

log = logging.getLogger(__name__)


class PoolState:
    def __init__(
        self, store: Store, *, lease_ttl: float, heartbeat_timeout: float, now: float
    ) -> None:
        self.store = store
        self.lease_ttl = lease_ttl
        self.heartbeat_timeout = heartbeat_timeout
        acceptors, leases = store.load()
        self.acceptors = {a.name: a for a in acceptors}
        self.leases: dict[str, Lease] = {}
        # A restart must not cost anyone their lease or acceptor: both get a fresh grace period.
        store.extend_active(now + lease_ttl)
        for acceptor in self.acceptors.values():
            acceptor.last_heartbeat = now
        for lease in leases:
            lease.expires_at = max(lease.expires_at, now + lease_ttl)
            self._occupy(lease)
            self.leases[lease.id] = lease
        log.info("loaded %d acceptors, %d active leases", len(self.acceptors), len(self.leases))

    def _occupy(self, lease: Lease) -> None:
        acceptor = self.acceptors.get(lease.acceptor)
        for device_id, mib in lease.devices.items():
            state = acceptor.devices.get(device_id) if acceptor else None
            if state is not None:
                state.used_mib += mib
                state.holders[lease.id] = mib

    def _vacate(self, lease: Lease) -> None:
        acceptor = self.acceptors.get(lease.acceptor)
        for device_id in lease.devices:
            state = acceptor.devices.get(device_id) if acceptor else None
            if state is not None and lease.id in state.holders:
                state.used_mib -= state.holders.pop(lease.id)

    def allocate(self, request: Request, now: float) -> Lease:
        placement = scheduler.place(request, self.acceptors.values())
        acceptor = self.acceptors[placement.acceptor]
        ttl = request.ttl or self.lease_ttl
        lease = Lease(
            id=f"l-{secrets.token_hex(8)}",
            acceptor=acceptor.name,
            data_address=acceptor.data_address,
            devices=dict(placement.devices),
            fraction=placement.fraction,
            holder=request.holder,
            queue=request.queue,
            credential=secrets.token_urlsafe(32),
            ttl=ttl,
            expires_at=now + ttl,
            created_at=now,
            image=request.image,
            worker=request.worker,
        )
        self.store.add_lease(lease)
        self._occupy(lease)
        self.leases[lease.id] = lease
        return lease

    def keep_alive(self, lease_id: str, now: float) -> float:
        lease = self.leases.get(lease_id)
        if lease is None:
            raise LeaseNotFoundError(f"lease {lease_id} is not active", hint="allocate a new one")
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
            log.info("lease %s %s (holder %s)", lease.id, state, lease.holder)
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

    def heartbeat(
        self, name: str, now: float, usage: Iterable[tuple[str, float, int]] = ()
    ) -> bool:
        """Note that the acceptor lives, with its leases' (id, cpu %, rss bytes)."""
        acceptor = self.acceptors.get(name)
        if acceptor is None or not acceptor.serving:
            return False  # it must register (again) first
        acceptor.last_heartbeat = now
        for lease_id, cpu, rss in usage:
            lease = self.leases.get(lease_id)
            if lease is not None and lease.acceptor == name:
                lease.cpu_percent, lease.rss_bytes = cpu, rss
        return True

    def reap(self, now: float) -> list[Lease]:
        """End expired leases and those of acceptors that stopped heartbeating."""
        ended = self.end(
            [lease for lease in self.leases.values() if lease.expires_at < now], EXPIRED, now
        )
        for acceptor in self.acceptors.values():
            if acceptor.up and now - acceptor.last_heartbeat > self.heartbeat_timeout:
                acceptor.up = False
                self.store.set_up(acceptor.name, False)
                log.warning("acceptor %s missed its heartbeats: marked down", acceptor.name)
                mine = [lease for lease in self.leases.values() if lease.acceptor == acceptor.name]
                ended += self.end(mine, REVOKED, now)
        return ended

    def device_states(self) -> list[tuple[AcceptorState, DeviceState]]:
        return [(a, s) for a in self.acceptors.values() for s in a.devices.values()]
