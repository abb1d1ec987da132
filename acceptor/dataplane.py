"""The acceptor's data-plane listener: authenticate each connection, hand it to its worker.

The handshake (docs/data-plane.md) proves the lease credential before anything else is read;
only then is the connected socket passed to that lease's worker, which owns it from there on.
One thread runs every handshake, reading each frame as its bytes arrive: an unauthenticated
connection holds an entry in a bounded table (:mod:`radium.acceptor.handshakes`: a deadline for
the whole exchange, a limit per source), never a thread, so idle or trickling peers cannot
starve the listener. Authenticated connections go to their lease's worker through a bounded
per-lease queue (:mod:`radium.acceptor.handoff`), each send with a deadline, so a worker that
stops reading stalls only its own lease.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import threading
import time
from typing import Callable, Protocol

from radium import addresses
from radium.acceptor.handoff import Handoffs, Workers, worker_gone
from radium.acceptor.handshakes import HANDSHAKE_DEADLINE, Pending, Table, Throttled, source_of
from radium.errors import ConfigError, UnavailableError
from radium_interposer import handshake, wire

__all__ = ["GRANT_WAIT", "DataPlane", "split_address", "worker_gone"]
log = logging.getLogger(__name__)
#: How long a handshake waits for the grant of a lease this acceptor has not prepared yet
#: (within the handshake's own deadline, and holding no thread).
GRANT_WAIT = 5.0
#: How often a handshake waiting for a grant looks again.
GRANT_POLL = 0.05
#: Connections accepted per turn of the loop before it serves those it has.
ACCEPT_BATCH = 64


class Credentials(Workers, Protocol):
    """What the listener needs of the slots (:class:`radium.acceptor.slots.Slots`)."""

    def credential(self, lease_id: str, wait: float = 0.0) -> str | None: ...


def split_address(address: str) -> tuple[str, int]:
    """``host:port`` as ``(host, port)``; ``:port``, every interface."""
    found = addresses.split_host_port(address, any_host="0.0.0.0")
    if found is None:
        raise ConfigError(f"data address {address!r} is not HOST:PORT")
    return found


class DataPlane:
    """The listener; ``table`` holds the connections still in their handshake."""

    def __init__(self, address: str, slots: Credentials, table: Table | None = None) -> None:
        self.address, self.slots = address, slots
        self.listener: socket.socket | None = None
        self.table = table if table is not None else Table()
        self.handoffs = Handoffs(slots)
        self.awaiting: list[Pending] = []  # authenticated-to-be, waiting for the lease's grant
        self.refused = 0
        self.refusals = Throttled("handshakes refused")
        self.evictions = Throttled("stalled handshakes closed")
        self.selector = selectors.DefaultSelector()
        self.waker, self._wake = socket.socketpair()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        host, port = split_address(self.address)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind((host, port))
        except OSError as exc:
            listener.close()
            raise UnavailableError(
                f"cannot listen for the data plane on {self.address}: {exc.strerror}",
                hint="set [acceptor] data_address to a free HOST:PORT of this host",
            ) from exc
        listener.listen(1024)
        listener.setblocking(False)
        self.listener = listener
        if port == 0:  # the port the kernel chose is the one to advertise
            self.address = f"{host}:{listener.getsockname()[1]}"
        self.selector.register(listener, selectors.EVENT_READ, "listener")
        self.waker.setblocking(False)
        self.selector.register(self.waker, selectors.EVENT_READ, "waker")
        self.thread = threading.Thread(target=self._loop, name="data-plane", daemon=True)
        self.thread.start()
        log.info("data plane listening on %s", self.address)

    def stop(self) -> None:
        listener, self.listener = self.listener, None
        if listener is None:
            return
        with contextlib.suppress(OSError):
            self._wake.send(b"x")
        if self.thread is not None:
            self.thread.join(timeout=10)
        listener.close()

    def _loop(self) -> None:
        try:
            while self.listener is not None:
                for key, _ in self.selector.select(self._wait()):
                    if key.data == "listener":
                        self._accept()
                    elif isinstance(key.data, Pending) and key.data.sock.fileno() >= 0:
                        self._serve(key.data, self._readable)  # (not closed for a newer one)
                now = time.monotonic()
                for late in self.table.expired(now):
                    self._refuse(late, f"no handshake within {HANDSHAKE_DEADLINE:g}s")
                if self.awaiting:
                    waiting, self.awaiting = self.awaiting, []
                    for pending in waiting:
                        self._serve(pending, self._verify)
        finally:
            for pending in list(self.table.entries.values()):
                self._close(pending)
            self.selector.close()

    def _wait(self) -> float | None:
        deadline = self.table.next_deadline()
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        if self.awaiting:
            wait = GRANT_POLL if wait is None else min(wait, GRANT_POLL)
        return wait

    def _accept(self) -> None:
        listener = self.listener
        for _ in range(ACCEPT_BATCH):
            if listener is None:
                return
            try:
                connection, peer = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of descriptors, say: the next turn tries again
                self.refusals.warn("data plane: cannot accept: %s", exc)
                return
            connection.setblocking(False)
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pending = Pending(
                connection, peer, source_of(peer), time.monotonic() + HANDSHAKE_DEADLINE
            )
            evicted = self.table.add(pending)
            self.selector.register(connection, selectors.EVENT_READ, pending)
            if evicted is not None:
                self.evictions.warn(
                    "data plane: closed the oldest handshake of %s for a new connection "
                    "(%d in progress from %s, %d in all)",
                    evicted.peer,
                    self.table.count(evicted.source),
                    evicted.source,
                    len(self.table),
                )
                self.refused += 1
                self._close(evicted)

    def _serve(self, pending: Pending, step: Callable[[Pending], None]) -> None:
        """Run one step of a handshake; any failure refuses that connection only."""
        try:
            step(pending)
        except handshake.Refused as exc:
            with contextlib.suppress(OSError):
                pending.sock.send(exc.reply)
            self._refuse(pending, str(exc))
        except (wire.ProtocolError, OSError) as exc:
            self._refuse(pending, str(exc) or type(exc).__name__)
        except Exception:  # a bug here must cost one connection, never the listener
            log.exception("data plane: handshake of %s failed", pending.peer)
            self._refuse(pending, "internal error")

    def _readable(self, pending: Pending) -> None:
        try:
            data = pending.sock.recv(pending.frame.missing())
        except (BlockingIOError, InterruptedError):
            return
        if not data:
            raise wire.ProtocolError("the peer closed the connection during the handshake")
        frame = pending.frame.add(data)
        if frame is None:
            return
        if not pending.challenged:
            _send_now(pending.sock, pending.state.hello(frame))
            pending.challenged = True
            return
        pending.state.proof(frame)
        self.selector.unregister(pending.sock)  # nothing more is read before WELCOME
        pending.grant_until = min(time.monotonic() + GRANT_WAIT, pending.deadline)
        self._verify(pending)

    def _verify(self, pending: Pending) -> None:
        """Check the proof; a lease not granted yet is looked for again until grant_until."""
        if pending.sock.fileno() < 0:  # closed meanwhile (evicted, expired)
            return
        credential = self.slots.credential(pending.state.lease)
        if credential is None and time.monotonic() < pending.grant_until:
            self.awaiting.append(pending)
            return
        _send_now(pending.sock, pending.state.verify(credential))
        self.table.remove(pending)
        pending.sock.setblocking(True)  # the worker gets the same open file: blocking
        self.handoffs.put(pending.state.lease, pending.sock, pending.peer)

    def _refuse(self, pending: Pending, why: str) -> None:
        self.refused += 1
        self.refusals.warn("data plane: refused %s: %s", pending.peer, why)
        self.table.remove(pending)
        self._close(pending)

    def _close(self, pending: Pending) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(pending.sock)
        pending.sock.close()


def _send_now(sock: socket.socket, data: bytes) -> None:
    """Send a handshake frame on a non-blocking socket: a fresh connection's send buffer takes
    it whole, so a peer that lets it fill (it never reads) is refused, not waited for."""
    if sock.send(data) != len(data):
        raise wire.ProtocolError("the peer does not read its handshake")
