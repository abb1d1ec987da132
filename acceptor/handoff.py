"""Authenticated data-plane connections on their way to the lease's worker.

A worker runs the tenant's code: it may still be starting (seconds), or may have stopped reading
its control socket (``kill -STOP`` of itself). Each lease has a bounded queue and at most one
thread handing its connections over, each send with a deadline, so a lease whose worker takes
nothing holds one thread and ``MAX_QUEUED`` descriptors, never the listener or another lease's
connections. A worker that let one send time out is *stuck*: later connections are offered
without waiting and refused at once (``WorkerGone``, logged) until it reads again.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import socket
import threading
from typing import Protocol

from radium.acceptor.handshakes import Throttled
from radium.errors import RadiumError
from radium_interposer import wire

__all__ = ["MAX_QUEUED", "SEND_TIMEOUT", "Handoffs", "Workers", "worker_gone"]

log = logging.getLogger("radium.acceptor.dataplane")
#: Connections of one lease waiting for its worker (a legitimate burst while it starts fits).
MAX_QUEUED = 128
#: How long one connection may wait for the worker to read its control socket.
SEND_TIMEOUT = 5.0


class Workers(Protocol):
    """Where connections go (:class:`radium.acceptor.slots.Slots`)."""

    def hand_over(self, lease_id: str, connection: socket.socket, timeout: float) -> None: ...


def worker_gone(reason: str) -> dict[str, object]:
    """The ERROR frame's metadata that answers the client's first call when its lease's worker
    could not take the connection: the client raises WorkerGone with the reason."""
    message = f"radium: the lease's worker could not start: {reason}"
    return {
        "error": f"WorkerGone: {message}",
        "type": "WorkerGone",
        "module": "radium_interposer.client",
        "args": [message],
        "tb": "",
    }


class Handoffs:
    """The per-lease queues of authenticated connections and the threads that empty them."""

    def __init__(self, workers: Workers) -> None:
        self.workers = workers
        self.lock = threading.Lock()
        self.queues: dict[str, collections.deque[tuple[socket.socket, object]]] = {}
        self.stuck: set[str] = set()  # guarded by lock
        self.refusals = Throttled("connections refused for their worker")
        self.overflows = Throttled("connections refused for a full queue")

    def put(self, lease: str, connection: socket.socket, peer: object) -> None:
        """Queue an authenticated (blocking) connection for the lease's worker; refuse it at
        once if the lease already has MAX_QUEUED waiting."""
        with self.lock:
            queue = self.queues.get(lease)
            start = queue is None
            if queue is None:
                queue = self.queues[lease] = collections.deque()
            full = len(queue) >= MAX_QUEUED
            if not full:
                queue.append((connection, peer))
        if full:
            why = f"{MAX_QUEUED} connections of lease {lease} are waiting for its worker"
            self._refuse(connection, peer, why, self.overflows)
        elif start:
            name = f"hand-over-{lease}"
            threading.Thread(target=self._drain, args=(lease,), name=name, daemon=True).start()

    def waiting(self, lease: str) -> int:
        """How many connections of the lease wait for its worker."""
        with self.lock:
            return len(self.queues.get(lease, ()))

    def _drain(self, lease: str) -> None:
        while True:
            with self.lock:
                queue = self.queues[lease]
                if not queue:
                    del self.queues[lease]
                    return
                connection, peer = queue.popleft()
                timeout = 0.0 if lease in self.stuck else SEND_TIMEOUT
            try:
                self._one(lease, connection, peer, timeout)
            finally:
                connection.close()

    def _one(self, lease: str, connection: socket.socket, peer: object, timeout: float) -> None:
        try:
            self.workers.hand_over(lease, connection, timeout)
        except socket.timeout:
            with self.lock:
                self.stuck.add(lease)
            why = f"the worker of lease {lease} is not taking connections (it does not read)"
            self._refuse(connection, peer, why)
        except (RadiumError, OSError) as exc:
            why = exc.one_line() if isinstance(exc, RadiumError) else (
                f"the worker of lease {lease} did not take the connection ({exc.strerror or exc})"
            )  # fmt: skip
            self._refuse(connection, peer, why)
        else:
            with self.lock:
                self.stuck.discard(lease)
            log.info("data plane: %s connected to lease %s", peer, lease)

    def _refuse(
        self, connection: socket.socket, peer: object, why: str, logs: Throttled | None = None
    ) -> None:
        """Tell the client why (its first call raises WorkerGone) and close."""
        (logs or self.refusals).warn("data plane: %s: %s", peer, why)
        with contextlib.suppress(OSError):
            connection.settimeout(SEND_TIMEOUT)
            wire.send(connection, wire.ERROR, 0, worker_gone(why))
        connection.close()
