"""The acceptor's data-plane listener: authenticate each connection, hand it to its worker.

The handshake (docs/data-plane.md) proves the lease credential before anything else is read;
only then is the connected socket passed to that lease's worker, which owns it from there on.
Handshakes run in threads, at most ``MAX_HANDSHAKES`` at once and each under a deadline, so
garbage or a flood of idle connections cannot starve the listener or the workers.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading

from radium.acceptor.slots import Slots
from radium.errors import ConfigError, RadiumError, UnavailableError
from radium_interposer import handshake, wire

log = logging.getLogger(__name__)
HANDSHAKE_TIMEOUT = 10.0
MAX_HANDSHAKES = 64
#: How long a handshake waits for the grant of a lease this acceptor has not prepared yet.
GRANT_WAIT = 5.0


def split_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(f"data address {address!r} is not HOST:PORT")
    return host.strip("[]") or "0.0.0.0", int(port)


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


class DataPlane:
    def __init__(self, address: str, slots: Slots) -> None:
        self.address, self.slots = address, slots
        self.listener: socket.socket | None = None
        self.pending = threading.BoundedSemaphore(MAX_HANDSHAKES)
        self.refused = 0

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
        listener.listen(128)
        self.listener = listener
        if port == 0:  # the port the kernel chose is the one to advertise
            self.address = f"{host}:{listener.getsockname()[1]}"
        threading.Thread(target=self._accept_forever, name="data-plane", daemon=True).start()
        log.info("data plane listening on %s", self.address)

    def stop(self) -> None:
        if self.listener is not None:
            with contextlib.suppress(OSError):
                self.listener.shutdown(socket.SHUT_RDWR)
            self.listener.close()
            self.listener = None

    def _accept_forever(self) -> None:
        listener = self.listener
        while listener is not None and listener.fileno() >= 0:
            try:
                connection, peer = listener.accept()
            except OSError:
                return
            if not self.pending.acquire(blocking=False):
                log.warning("data plane: too many handshakes in flight; dropping %s", peer)
                connection.close()
                continue
            threading.Thread(target=self._serve, args=(connection, peer), daemon=True).start()

    def _serve(self, connection: socket.socket, peer: object) -> None:
        try:
            authenticated = self._authenticate(connection, peer)
            if authenticated is not None:
                self._hand_over(connection, peer, *authenticated)
        finally:
            connection.close()
            self.pending.release()

    def _authenticate(self, connection: socket.socket, peer: object) -> tuple[str, int] | None:
        """The lease id and protocol version the peer proved, or None (refused, logged)."""
        try:
            connection.settimeout(HANDSHAKE_TIMEOUT)
            return handshake.server(
                connection, lambda lease: self.slots.credential(lease, GRANT_WAIT)
            )
        except (wire.ProtocolError, OSError) as exc:
            self.refused += 1
            log.warning("data plane: refused %s: %s", peer, exc)
            return None

    def _hand_over(self, connection: socket.socket, peer: object, lease: str, version: int) -> None:
        """Give the connection to the lease's worker; if it cannot take it, tell the client why."""
        try:
            connection.settimeout(None)
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.slots.hand_over(lease, connection)
            log.info("data plane: %s connected to lease %s (v%d)", peer, lease, version)
        except (RadiumError, OSError) as exc:
            why = exc.one_line() if isinstance(exc, RadiumError) else (
                f"the worker of lease {lease} did not take the connection ({exc.strerror or exc})"
            )  # fmt: skip
            log.warning("data plane: %s: %s", peer, why)
            with contextlib.suppress(OSError):
                wire.send(connection, wire.ERROR, 0, worker_gone(why))
