"""The store contract: what the pool's core asks of its durable state (docs/store.md).

The pool keeps its working state in memory and writes every change through a store before it
answers, so a restart (even after SIGKILL) rebuilds exactly the leases it had granted. Two
implementations keep it: :mod:`radium.pool.store.sqlite` (one file, the default) and
:mod:`radium.pool.store.etcd` (pools of several replicas). The contract tests
(``tests/pool/test_store_contract.py``) run against both. A store that cannot write raises a
:class:`radium.errors.RadiumError` leaf (``StoreUnavailableError``, ``NotLeaderError``) and has
changed nothing. This module imports neither sqlite3 nor etcd: the core depends on it alone.
"""

from __future__ import annotations

from typing import Iterable, Protocol

from radium.pool.model import AcceptorState, ImageStatus, Lease, Queue
from radium.pool.store.ended import EndedLog, Entry

__all__ = ["Store"]


class Store(Protocol):
    """The pool's durable state: acceptors, leases (active and ended), queues and images."""

    #: The ended leases it holds, in memory: what a listing pages through.
    ended_log: EndedLog

    def load(self) -> tuple[list[AcceptorState], list[Lease]]:
        """The acceptors (with their devices, in device order; not registered: a restarted
        pool gives an acceptor nothing until it registers again) and the active leases, whole
        (every field but the usage, which acceptors report anew)."""
        ...

    def save_acceptor(self, acceptor: AcceptorState) -> None:
        """Replace the acceptor and its device list."""
        ...

    def set_up(self, name: str, up: bool) -> None:
        """Change only the acceptor's up flag; nothing for an unknown name."""
        ...

    def add_lease(self, lease: Lease) -> None:
        """Create an active lease; raise ``AlreadyExistsError`` if its id exists."""
        ...

    def end_leases(self, leases: Iterable[Lease]) -> None:
        """Move leases from the active set to the ended set with their state and end time,
        forgetting in the same write the oldest ended beyond the kept bound."""
        ...

    def extend_active(self, expires_at: float) -> None:
        """Give every active lease not under a preemption notice an expiry of at least
        ``expires_at`` (a restarted pool's grace for its holders to come back)."""
        ...

    def mark_preempted(self, leases: Iterable[Lease]) -> None:
        """Store each lease's preemption notice: ``preempted_at``, ``preempted_for`` and its
        shortened ``expires_at``."""
        ...

    def load_queues(self) -> list[Queue]:
        """Every queue, in name order."""
        ...

    def save_queue(self, queue: Queue) -> None:
        """Create or replace the queue of this name."""
        ...

    def drop_queue(self, name: str) -> None:
        """Forget the queue; nothing for an unknown name."""
        ...

    def ended_leases(self, limit: int, before: Entry | None = None) -> list[Lease]:
        """The newest ended leases, newest first, after the entry ``before`` (a page's last:
        :meth:`radium.pool.store.ended.EndedLog.newest`), from memory."""
        ...

    def prune(self, ended_before: float) -> int:
        """Forget leases that ended before this time (beyond the newest kept); how many."""
        ...

    def load_images(self) -> tuple[list[str], list[ImageStatus]]:
        """The registered image references, sorted, and every (reference, acceptor) status."""
        ...

    def save_image(self, ref: str, now: float) -> None:
        """Register an image reference, added at ``now`` (again: replaced)."""
        ...

    def drop_image(self, ref: str) -> None:
        """Forget an image reference (its statuses are dropped one by one)."""
        ...

    def save_image_status(self, status: ImageStatus) -> None:
        """Create or replace the status of one (reference, acceptor)."""
        ...

    def drop_image_status(self, ref: str, acceptor: str) -> None:
        """Forget the status of one (reference, acceptor)."""
        ...

    def close(self) -> None:
        """Commit what is held and close; closing again does nothing, as a file's close."""
        ...
