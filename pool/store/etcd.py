"""The pool's state in etcd: the :class:`~radium.pool.store.base.Store` contract for pools of
several replicas (docs/store.md).

Every record is one JSON value under the configured prefix. Every write is one etcd transaction
that also compares the leader key's creation revision with the one this replica created
(``fence``): a replica that lost the leadership, even one paused past its etcd lease, can no
longer change anything, so no device is ever granted twice by two leaders.
"""

from __future__ import annotations

import json
import logging
import urllib.parse
from typing import Any, Iterable, Protocol

from radium.errors import AlreadyExistsError, NotLeaderError, UnavailableError
from radium.pool.model import AcceptorState, ImageStatus, Lease, Queue
from radium.pool.store import records
from radium.pool.store.commits import Deferrable
from radium.pool.store.ended import ENDED_KEPT, EndedLog, Entry
from radium.pool.store.etcd_kv import MAX_TXN_OPS, EtcdKV, KeyValue, absent, created_at, delete, put

__all__ = ["EtcdStore", "Fence"]

log = logging.getLogger(__name__)


class Fence(Protocol):
    """The leadership writes are made under (:class:`radium.pool.store.leadership.Leadership`)."""

    key: str
    revision: int

    def lost(self, why: str) -> None: ...


def _target(op: dict[str, Any]) -> str:
    """The (encoded) key an operation writes."""
    return str(next(iter(op.values()))["key"])


def _quoted(*parts: str) -> str:
    return "/".join(urllib.parse.quote(part, safe="") for part in parts)


class EtcdStore(Deferrable):
    """The store in etcd. Each change is a transaction of its own before it returns, except
    within :meth:`deferring`: there changes wait, one operation per key (the last), for
    :meth:`commit` to send them in as few transactions as etcd allows (the pool's group
    commit, :mod:`radium.pool.store.commits`); the first such change calls ``on_open``."""

    #: A batch is a list of operations: the commit thread sends it (docs/store.md).
    sends_in_background = True

    def __init__(
        self, kv: EtcdKV, prefix: str, fence: Fence | None = None, ended_kept: int = ENDED_KEPT
    ) -> None:
        super().__init__()
        self.kv = kv
        self.prefix = prefix if prefix.endswith("/") else prefix + "/"
        self.fence = fence
        self.ended_log = EndedLog(self._read_ended, ended_kept)
        #: The revision the last prune saw: the next compacts etcd's history up to it.
        self._compact_to = 0
        #: Deferred operations by key: a lease granted and ended in one batch is one delete
        #: and one put (etcd refuses a transaction that names a key twice).
        self._pending: dict[str, dict[str, Any]] = {}

    def _send_held(self) -> None:
        self._send_batch(self._take_held())

    def _take_held(self) -> list[dict[str, Any]]:
        pending, self._pending = self._pending, {}
        return list(pending.values())

    def _send_batch(self, batch: list[dict[str, Any]]) -> None:
        if batch:
            self._apply(batch)

    def _key(self, kind: str, *parts: str) -> str:
        return f"{self.prefix}{kind}/{_quoted(*parts)}"

    def _records(self, kind: str) -> list[tuple[KeyValue, dict[str, Any]]]:
        self._commit_ahead()  # a read sees what this replica has changed
        return [(kv, json.loads(kv.value)) for kv in self.kv.range(f"{self.prefix}{kind}/")]

    def _write(self, ops: list[dict[str, Any]], compare: Iterable[dict[str, Any]] = ()) -> None:
        if self._deferring:
            # No compare of a new lease's absence here: its id is 64 random bits, and the
            # leader's memory, fenced, knows every active one.
            self._hold()
            for op in ops:
                self._pending[_target(op)] = op
            return
        self._commit_ahead()  # the changes made before this one go first
        self._apply(ops, compare)

    def _apply(self, ops: list[dict[str, Any]], compare: Iterable[dict[str, Any]] = ()) -> None:
        """Apply ``ops`` under the fence, in transactions of etcd's size limit (a change that
        needs several, like a restart extending every lease, is idempotent per record)."""
        guard = list(compare)
        if self.fence is not None:
            guard.append(created_at(self.fence.key, self.fence.revision))
        for start in range(0, len(ops), MAX_TXN_OPS):
            if not self.kv.txn(guard, ops[start : start + MAX_TXN_OPS]):
                self._refused()

    def _refused(self) -> None:
        if self.fence is not None:
            holder = self.kv.range(self.fence.key)
            if not holder or holder[0].create_revision != self.fence.revision:
                why = "another replica holds the leadership now"
                self.fence.lost(why)
                raise NotLeaderError(
                    f"this pool replica is no longer the leader: {why}",
                    hint="retry: clients move to the replica that leads",
                )
        raise AlreadyExistsError("the record to create exists already in etcd")

    def load(self) -> tuple[list[AcceptorState], list[Lease]]:
        acceptors = [records.acceptor_from(r) for _, r in self._records("acceptors")]
        leases = [records.lease_from(r) for _, r in self._records("leases")]
        # The ended log in the background: a new leader must serve first (failover).
        self.ended_log.read_in_background()
        return acceptors, leases

    def save_acceptor(self, acceptor: AcceptorState) -> None:
        record = records.acceptor_record(acceptor)
        self._write([put(self._key("acceptors", acceptor.name), records.dump(record))])

    def set_up(self, name: str, up: bool) -> None:
        key = self._key("acceptors", name)
        for kv, record in self._records("acceptors"):
            if kv.key == key:
                record["up"] = up
                self._write([put(key, records.dump(record))])

    def add_lease(self, lease: Lease) -> None:
        key = self._key("leases", lease.id)
        value = records.dump(records.lease_record(lease))
        self._write([put(key, value)], compare=[absent(key)])

    def end_leases(self, leases: Iterable[Lease]) -> None:
        leases = list(leases)
        gone = self.ended_log.ended(leases)
        at_once = set(gone).intersection(lease.id for lease in leases)  # never kept
        ops = []
        for lease in leases:
            if lease.id not in at_once:  # (etcd refuses a put and a delete of one key at once)
                record = records.dump(records.lease_record(lease))
                ops.append(delete(self._key("leases", lease.id)))
                ops.append(put(self._key("ended", lease.id), record))
        # A lease's delete and its ended record go in one transaction (even op counts); what
        # is forgotten comes after them.
        ops.extend(delete(self._key("leases", x)) for x in at_once)
        ops.extend(delete(self._key("ended", x)) for x in gone if x not in at_once)
        self._write(ops)

    def _put_leases(self, leases: Iterable[Lease]) -> None:
        self._write(
            [put(self._key("leases", x.id), records.dump(records.lease_record(x))) for x in leases]
        )

    def extend_active(self, expires_at: float) -> None:
        due = []
        for _, record in self._records("leases"):
            if not record["preempted_at"] and record["expires_at"] < expires_at:
                lease = records.lease_from(record)
                lease.expires_at = expires_at
                due.append(lease)
        self._put_leases(due)

    def mark_preempted(self, leases: Iterable[Lease]) -> None:
        self._put_leases(leases)

    def load_queues(self) -> list[Queue]:
        return sorted(
            (records.queue_from(r) for _, r in self._records("queues")), key=lambda q: q.name
        )

    def save_queue(self, queue: Queue) -> None:
        value = records.dump(records.queue_record(queue))
        self._write([put(self._key("queues", queue.name), value)])

    def drop_queue(self, name: str) -> None:
        self._write([delete(self._key("queues", name))])

    def ended_leases(self, limit: int, before: Entry | None = None) -> list[Lease]:
        return self.ended_log.newest(limit, before)

    def prune(self, ended_before: float) -> int:
        """Forget leases that ended before this time, and beyond the newest kept; how many.
        Then compact etcd's history up to the revision the last prune saw: every change
        leaves a revision behind, and a pool churning through leases would otherwise fill
        etcd's space quota with them (compacting is Kubernetes' API server's job too)."""
        gone = self.ended_log.forget(ended_before)
        self._write([delete(self._key("ended", lease_id)) for lease_id in gone])
        try:
            if self._compact_to:
                self.kv.compact(self._compact_to)
            self._compact_to = self.kv.revision(self.prefix)
        except UnavailableError as exc:  # the pool serves on; etcd's own may compact
            log.warning("compacting etcd's history: %s", exc.one_line())
        return len(gone)

    def _read_ended(self) -> list[Lease]:
        # Not _records: this read may come within a deferred batch, which it must not commit
        # ahead, or run in a thread of its own (EndedLog.read_in_background), where leases
        # that end meanwhile are noted apart.
        kvs = self.kv.range(f"{self.prefix}ended/")
        return [records.lease_from(json.loads(kv.value)) for kv in kvs]

    def load_images(self) -> tuple[list[str], list[ImageStatus]]:
        refs = sorted(r["ref"] for _, r in self._records("images"))
        statuses = [records.image_status_from(r) for _, r in self._records("image-status")]
        return refs, statuses

    def save_image(self, ref: str, now: float) -> None:
        value = records.dump({"ref": ref, "added_at": now})
        self._write([put(self._key("images", ref), value)])

    def drop_image(self, ref: str) -> None:
        self._write([delete(self._key("images", ref))])

    def save_image_status(self, status: ImageStatus) -> None:
        key = self._key("image-status", status.acceptor, status.ref)
        self._write([put(key, records.dump(records.image_status_record(status)))])

    def drop_image_status(self, ref: str, acceptor: str) -> None:
        self._write([delete(self._key("image-status", acceptor, ref))])

    def close(self) -> None:
        """Send what is deferred; the connection belongs to the replica, which outlives a
        store."""
        try:
            self.commit()
        except UnavailableError as exc:  # deposed or cut off: the next leader reloads etcd
            log.warning("deferred changes not stored: %s", exc.one_line())
