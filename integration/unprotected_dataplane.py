"""The acceptor's data plane as it was before issue 34 (holes 4 and 5), to show the probes of
``test_hostile_dataplane.py`` catch those holes: a thread per handshake, at most 64, a per-recv
timeout instead of a deadline for the exchange, no per-source limit, and hand-overs that wait
for the worker for ever.

Run as ``python unprotected_dataplane.py RADIUM_CLI acceptor serve ...``: a real acceptor with
only its listener replaced. Never used outside those probes.
"""

from __future__ import annotations

import contextlib
import logging
import runpy
import socket
import sys
import threading

from radium.acceptor import daemon
from radium.acceptor.dataplane import Credentials, DataPlane, split_address, worker_gone
from radium.errors import RadiumError
from radium_interposer import handshake, wire

log = logging.getLogger("radium.acceptor.dataplane")
HANDSHAKE_TIMEOUT = 10.0
MAX_HANDSHAKES = 64
GRANT_WAIT = 5.0


class UnprotectedDataPlane(DataPlane):
    """The old listener (only ``start`` and the threads differ; ``stop`` closes the socket)."""

    def __init__(self, address: str, slots: Credentials) -> None:
        super().__init__(address, slots)
        self.pending = threading.BoundedSemaphore(MAX_HANDSHAKES)

    def start(self) -> None:
        host, port = split_address(self.address)
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(128)
        self.listener = listener
        if port == 0:
            self.address = f"{host}:{listener.getsockname()[1]}"
        threading.Thread(target=self._accept_forever, name="data-plane", daemon=True).start()
        log.info("data plane listening on %s (unprotected, as before issue 34)", self.address)

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
            threading.Thread(target=self._serve_old, args=(connection, peer), daemon=True).start()

    def _serve_old(self, connection: socket.socket, peer: object) -> None:
        try:
            connection.settimeout(HANDSHAKE_TIMEOUT)  # per recv: a trickle never meets it
            lease, _ = handshake.server(
                connection, lambda lease: self.slots.credential(lease, GRANT_WAIT)
            )
        except (wire.ProtocolError, OSError) as exc:
            self.refused += 1
            log.warning("data plane: refused %s: %s", peer, exc)
        else:
            try:
                connection.settimeout(None)
                self.slots.hand_over(lease, connection, None)  # type: ignore[arg-type]
                log.info("data plane: %s connected to lease %s", peer, lease)
            except (RadiumError, OSError) as exc:
                with contextlib.suppress(OSError):
                    wire.send(connection, wire.ERROR, 0, worker_gone(str(exc)))
        finally:
            connection.close()
            self.pending.release()


if __name__ == "__main__":
    daemon.DataPlane = UnprotectedDataPlane  # type: ignore[misc]
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")
