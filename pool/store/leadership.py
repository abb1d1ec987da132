"""Leader election among pool replicas through etcd (docs/store.md).

The leader key holds the leader's address and is bound to an etcd lease the leader keeps alive.
A replica leads from the revision at which it created the key; every write the store makes
compares that revision (:class:`radium.pool.store.etcd.EtcdStore`), so a replica that lost the
key — its lease expired while it was paused or cut off from etcd — can change nothing. Only the
leader serves; the others wait for the key to go and then campaign.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Callable, Protocol

from radium.errors import StoreUnavailableError
from radium.pool.store.etcd_kv import EtcdKV, absent, put

__all__ = ["Leadership", "LeaseKeeper", "campaign", "current_leader", "leader_key"]

log = logging.getLogger(__name__)


class LeaseKeeper(Protocol):
    """What keeping the leadership needs of etcd (:class:`EtcdKV`)."""

    timeout: float

    def keep_alive(self, lease: int) -> int: ...

    def revoke(self, lease: int) -> None: ...


class Leadership:
    """This replica's hold on the leader key, kept alive by a thread until it is lost or
    resigned. ``on_lost`` runs once, on that thread or the caller's."""

    def __init__(self, kv: LeaseKeeper, key: str, revision: int, lease: int, ttl: int) -> None:
        self.kv = kv
        self.key = key
        self.revision = revision
        self.lease = lease
        self.ttl = ttl
        self.on_lost: Callable[[str], None] = lambda why: None
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._keep, name="leadership", daemon=True)

    def start(self, on_lost: Callable[[str], None]) -> None:
        self.on_lost = on_lost
        self._thread.start()

    @property
    def held(self) -> bool:
        return not self._done.is_set()

    def lost(self, why: str) -> None:
        with self._lock:
            if self._done.is_set():
                return
            self._done.set()
        log.error("lost the pool's leadership: %s", why)
        self.on_lost(why)

    def _keep(self) -> None:
        # Renew three times per TTL. The leadership is given up as lost once a TTL and one
        # etcd call's timeout have passed since the last renewal etcd confirmed. Not a TTL
        # alone: an etcd election (one member killed) stalls every call for about a second
        # without ending any lease (etcd's new leader extends them all), and a leader that
        # stepped down for it would stop the whole pool. Waiting longer is safe: every write
        # is fenced on the key, so a replica that lost it meanwhile can grant nothing.
        confirmed = time.monotonic()
        patience = self.ttl + self.kv.timeout
        while not self._done.wait(self.ttl / 3):
            try:
                left = self.kv.keep_alive(self.lease)
            except StoreUnavailableError as exc:
                if time.monotonic() - confirmed >= patience:
                    self.lost(f"etcd unreachable for {patience:g}s ({exc.message})")
                continue
            if left <= 0:
                self.lost("its etcd lease expired")
            else:
                confirmed = time.monotonic()

    def resign(self) -> None:
        """Give the key up at once, so that another replica leads without waiting a TTL."""
        with self._lock:
            self._done.set()
        try:  # also once lost: the key may still be ours while etcd was out of reach
            self.kv.revoke(self.lease)
        except StoreUnavailableError as exc:
            log.info("leader lease not revoked (%s): it lapses within %ds", exc.message, self.ttl)


def leader_key(prefix: str) -> str:
    """The key the leader of the pool under ``prefix`` holds."""
    return f"{prefix.rstrip('/')}/leader"


def current_leader(kv: EtcdKV, prefix: str) -> str:
    """The address of the replica that leads, or "" when none does."""
    held = kv.range(leader_key(prefix))
    return str(json.loads(held[0].value).get("address", "")) if held else ""


def campaign(
    kv: EtcdKV,
    prefix: str,
    address: str,
    ttl: int,
    *,
    stop: threading.Event,
    poll: float = 0.1,
) -> Leadership | None:
    """Wait to become the leader (None if ``stop`` is set first). etcd being unreachable is
    waited out too: a replica keeps trying until it leads or is stopped."""
    key = leader_key(prefix)
    value = json.dumps({"address": address})
    waiting_for = None
    while not stop.is_set():
        try:
            holder = current_leader(kv, prefix)
            if not holder:
                lease = kv.grant(ttl)
                revision = kv.txn([absent(key)], [put(key, value, lease)])
                if revision:
                    log.info("leading the pool from etcd revision %d", revision)
                    return Leadership(kv, key, revision, lease, ttl)
                kv.revoke(lease)
            elif holder != waiting_for:
                log.info("standing by: the pool replica at %s leads", holder)
                waiting_for = holder
        except StoreUnavailableError as exc:
            if waiting_for != exc.message:
                log.warning("standing by: %s", exc.one_line())
                waiting_for = exc.message
        stop.wait(poll)
    return None
