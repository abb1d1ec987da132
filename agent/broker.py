"""The connection broker: each leased container's data-plane socket, and what comes through it.

A container asks ``connect`` on its ``dp.sock``; the broker dials the lease's acceptor, proves
the lease credential (the data-plane handshake) and passes the connected socket in
(``SCM_RIGHTS``). The container never sees the credential and needs no network of its own.
The reply says which data-plane version the handshake agreed (``v``), so the interposer can
refuse a socket that speaks another than its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import socket
from typing import Any, Callable

from radium.agent.book import Held
from radium.agentprotocol import REQUEST_TIMEOUT, bad_request, encode
from radium.errors import AuthError, LeaseNotFoundError, MountError, RadiumError, UnavailableError
from radium_interposer import handshake, wire
from radium_interposer.errors import VersionMismatch

__all__ = [
    "DATA_SOCKET",
    "DIAL_TIMEOUT",
    "SOCKET_MODE",
    "ConnectionBroker",
    "Dialer",
    "bind_unix",
    "dial",
    "dial_versioned",
]

log = logging.getLogger(__name__)
#: The container's data-plane socket, in its runtime directory (``/run/radium`` inside).
DATA_SOCKET = "dp.sock"
DIAL_TIMEOUT = 10.0
SOCKET_MODE = 0o660

#: (data address, lease id, credential) -> an authenticated connection to the lease's worker,
#: and the data-plane version its handshake agreed.
Dialer = Callable[[str, str, str], tuple[socket.socket, int]]


def bind_unix(path: str) -> socket.socket:
    """A listening unix socket at ``path``, however long (container ids make long paths).

    sun_path holds 108 bytes; binding through ``/proc/self/fd/N`` of the directory does not
    depend on the directory's path length.
    """
    directory, name = os.path.split(path)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    fd = os.open(directory, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        bound = f"/proc/self/fd/{fd}/{name}"
        listener.bind(bound)
        # The container's user only (the directory's group, radium.hooks.rundir): whoever
        # connects runs code in the lease and reaches the container's files through it.
        os.chown(bound, -1, os.fstat(fd).st_gid)
        os.chmod(bound, SOCKET_MODE)
        listener.listen(64)
    except OSError:
        listener.close()
        raise
    finally:
        os.close(fd)
    return listener


def dial(address: str, lease_id: str, credential: str) -> socket.socket:
    """A connection to the lease's worker, authenticated with the lease credential."""
    return dial_versioned(address, lease_id, credential)[0]


def dial_versioned(address: str, lease_id: str, credential: str) -> tuple[socket.socket, int]:
    """:func:`dial`, with the data-plane version agreed. VersionMismatch (its line names both
    versions and what to update) when the acceptor speaks none of ours."""
    host, _, port = address.rpartition(":")
    try:
        sock = socket.create_connection((host.strip("[]"), int(port)), timeout=DIAL_TIMEOUT)
    except (OSError, ValueError) as exc:
        raise UnavailableError(
            f"acceptor data plane at {address!r} is unreachable: {exc}",
            hint="is the lease's acceptor running and its data_address reachable from here?",
        ) from exc
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        version = handshake.client(sock, lease_id, credential)
        sock.settimeout(None)
    except VersionMismatch:
        sock.close()
        raise
    except handshake.AuthenticationError as exc:
        sock.close()
        raise AuthError(f"acceptor at {address} refused lease {lease_id}: {exc}") from exc
    except (OSError, wire.ProtocolError) as exc:
        sock.close()
        raise UnavailableError(f"data-plane handshake with {address} failed: {exc}") from exc
    return sock, version


class ConnectionBroker:
    """The data-plane sockets of leased containers; ``lookup`` finds a container's lease."""

    def __init__(
        self, lookup: Callable[[str], Held | None], dialer: Dialer = dial_versioned
    ) -> None:
        self.lookup, self.dialer = lookup, dialer
        self.servers: dict[str, asyncio.AbstractServer] = {}

    async def open(self, held: Held) -> None:
        """The container's socket (re-made by a restarted agent); none without a runtime dir."""
        if not held.runtime_dir or not os.path.isdir(held.runtime_dir):
            return
        path = os.path.join(held.runtime_dir, DATA_SOCKET)
        try:
            listener = bind_unix(path)
        except OSError as exc:
            raise MountError(
                f"cannot create the container's data-plane socket {path}: {exc.strerror or exc}"
            ) from exc
        self.servers[held.container] = await asyncio.start_unix_server(
            functools.partial(self.serve, held.container), sock=listener
        )

    def close(self, container: str) -> None:
        server = self.servers.pop(container, None)
        if server is not None:
            server.close()

    def close_all(self) -> None:
        for container in list(self.servers):
            self.close(container)

    async def serve(
        self, container: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """One ``connect`` request: dial the acceptor, authenticate, pass the socket in."""
        connected: socket.socket | None = None
        try:
            await asyncio.wait_for(reader.readline(), timeout=REQUEST_TIMEOUT)
            held = self.lookup(container)
            if held is None:
                raise LeaseNotFoundError(f"container {container} holds no lease")
            connected, version = await asyncio.to_thread(
                self.dialer, str(held.lease.get("data_address", "")), held.lease_id, held.credential
            )
            reply: dict[str, Any] = {"ok": True, "v": version}
        except VersionMismatch as exc:
            # Typed, so the container raises it as VersionMismatch with this very line.
            log.warning("container %s: %s", container, exc)
            reply = {"ok": False, "error": str(exc), "type": "VersionMismatch"}
        except RadiumError as exc:
            reply = {"ok": False, "error": exc.one_line()}
        except (asyncio.TimeoutError, ConnectionError, ValueError) as exc:
            reply = bad_request(exc)
        try:
            raw = writer.get_extra_info("socket")
            with socket.socket(fileno=os.dup(raw.fileno())) as out:
                out.setblocking(True)
                if connected is not None:
                    wire.send_fd(out, encode(reply), connected.fileno())
                else:
                    out.sendall(encode(reply))
        except OSError as exc:
            log.warning("container %s: handing over a connection: %s", container, exc)
        finally:
            if connected is not None:
                connected.close()
            writer.close()
