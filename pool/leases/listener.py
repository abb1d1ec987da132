"""The pool's side of the lease socket (docs/lease-socket.md): the lease stream's calls as
length-prefixed protobuf frames on a TCP (or mutual TLS) connection, served by the same
:class:`Leasing` as the gRPC stream; who may connect (a token, or a certificate's role). The
connections themselves are held by the front, a process of their own (docs/lease-front.md),
which this module starts, restarts, and talks to over one link."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import subprocess
import sys
from typing import Collection

from radium import rpc_guard
from radium.addresses import parse_address
from radium.configtree import TlsConfig
from radium.errors import AuthError, LeaseWireError, RadiumError, UnavailableError
from radium.pool.leases import link
from radium.pool.leases.connection import Authorize, LeaseConnection, give_back_unsent
from radium.pool.leases.front import server_context
from radium.pool.leases.leasing import Leasing
from radium.proto import pool_pb2 as pb

__all__ = ["FRONT_RESTART", "FRONT_START", "LeaseListener", "role_authorize", "token_authorize"]

log = logging.getLogger(__name__)
#: Seconds a new front has to say it is ready; seconds before a dead one is replaced.
FRONT_START = 10.0
FRONT_RESTART = 1.0


def token_authorize(tokens: Collection[str]) -> Authorize:
    """Hellos must carry one of ``tokens`` (the pool's agent tokens)."""
    accepted = [t.encode() for t in tokens if t]

    def authorize(hello: pb.LeaseHello, _: bytes) -> RadiumError | None:
        return rpc_guard.token_refused("lease socket", hello.token.encode(), accepted)

    return authorize


def role_authorize(roles: Collection[str]) -> Authorize:
    """The client's certificate (verified by TLS, in the front) must be of one of ``roles``."""

    def authorize(_: pb.LeaseHello, certificate: bytes) -> RadiumError | None:
        if not certificate:
            return AuthError("lease socket: no client certificate")
        pem = ssl.DER_cert_to_PEM_cert(certificate).encode()
        return rpc_guard.certificate_refused("lease socket", pem, roles)

    return authorize


class _Link(link.LinkEnd):
    """The pool's end of the link to one front process."""

    def __init__(self, listener: LeaseListener, process: subprocess.Popen[bytes]) -> None:
        super().__init__()
        self.listener = listener
        self.process = process
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def received(self) -> None:
        try:
            for kind, number, payload in link.messages(self.buffer, link.FROM_FRONT):
                if kind == link.READY:
                    if not self.ready.done():
                        self.ready.set_result(None)
                else:
                    self.listener.received(self, kind, number, payload)
        except LeaseWireError as exc:
            log.error("%s; stopping that front", exc.message)
            self.process.kill()
            if self.transport is not None:
                self.transport.abort()

    def pause_writing(self) -> None:  # the front does not read: stop reading its calls
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.transport is not None:
            self.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if not self.ready.done():
            self.ready.set_exception(UnavailableError("the lease-socket front exited"))
        self.listener.front_lost(self)


class LeaseListener:
    """Listens on the lease socket's address through a front process, and serves each of its
    connections as one lease session (:class:`LeaseConnection`); sends what they queued when a
    commit's answers are told (``Commits.told``), or in the next turn."""

    def __init__(
        self, leasing: Leasing, authorize: Authorize, tls: TlsConfig | None = None
    ) -> None:
        self._leasing = leasing
        self._authorize = authorize
        self._tls = tls
        if tls is not None:
            server_context(tls)  # bad files fail here, in the pool, with their one line
        self._listening: socket.socket | None = None
        self._link: _Link | None = None
        self._connections: dict[int, LeaseConnection] = {}
        #: Connections with replies to send: all go out at the end of the batch told, or in
        #: the next turn if none is told first.
        self._to_send: list[LeaseConnection] = []
        self._flush_due = False
        self._closing = False
        self._restart: asyncio.Task[None] | None = None

    async def start(self, address: str) -> None:
        host, port = parse_address(address, "pool.lease_listen")
        try:
            self._listening = socket.create_server((host, port), family=_family(host), backlog=1024)
        except OSError as exc:
            raise UnavailableError(
                f"cannot listen on {address} for the lease socket: {exc.strerror}",
                hint="is another pool running? [pool] lease_listen must be free",
            ) from exc
        try:
            await self._start_front()
        except BaseException:
            self._listening.close()
            raise
        self._leasing.pool.commits.told.append(self.flush)

    @property
    def port(self) -> int:
        assert self._listening is not None
        return int(self._listening.getsockname()[1])

    @property
    def front_pid(self) -> int | None:
        """The front's process; None while a dead one is being replaced."""
        return self._link.process.pid if self._link is not None else None

    async def close(self) -> None:
        """Stop listening and end every connection (the pool stops, or stops leading)."""
        self._closing = True
        if self._restart is not None:
            self._restart.cancel()
        if self.flush in self._leasing.pool.commits.told:
            self._leasing.pool.commits.told.remove(self.flush)
        front, self._link = self._link, None
        if front is not None:
            if front.transport is not None:
                front.transport.close()  # the front reads the end and exits
            await _ended(front.process)
        self._end_connections()
        if self._listening is not None:
            self._listening.close()

    def flush(self) -> None:
        """Send every connection's queued replies, in one write to the front."""
        self._flush_due = False
        connections, self._to_send = self._to_send, []
        for connection in connections:
            connection.flush()
        if self._link is not None:
            self._link.outbox.flush()

    def received(self, front: _Link, kind: int, number: int, payload: bytes) -> None:
        """One message from the front (docs/lease-front.md)."""
        if kind == link.CALL:
            connection = self._connections.get(number)
            if connection is not None and not connection.call(payload):
                del self._connections[number]
        elif kind == link.HELLO:
            connection = LeaseConnection(number, self._leasing, front.outbox, self._queued)
            if connection.hello(payload, self._authorize):
                self._connections[number] = connection
        elif kind == link.GONE:
            if (connection := self._connections.pop(number, None)) is not None:
                connection.end()
        elif kind == link.UNSENT:
            give_back_unsent(self._leasing, payload)

    def front_lost(self, front: _Link) -> None:
        """The front's link ended: every connection with it."""
        if front is not self._link:
            return
        self._link = None
        self._end_connections()
        if not self._closing:
            self._restart = asyncio.create_task(self._replace(front.process))

    async def _start_front(self) -> None:
        assert self._listening is not None
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        fds = (self._listening.fileno(), theirs.fileno())
        # -I: not the working directory (a `radium/` there would run as root, or hide the
        # installed package), nor PYTHON* variables or the user's site; site-packages (and an
        # editable install's finder in it) stay.
        argv = [sys.executable, "-I", "-m", "radium.pool.leases.front"]
        argv += ["--listen-fd", str(fds[0]), "--link-fd", str(fds[1])]
        if self._tls is not None:
            argv += ["--tls-ca", self._tls.ca, "--tls-cert", self._tls.cert]
            argv += ["--tls-key", self._tls.key]
        try:
            process = subprocess.Popen(argv, pass_fds=fds, stdin=subprocess.DEVNULL)
        except OSError as exc:
            ours.close()
            raise UnavailableError(f"cannot start the lease-socket front: {exc}") from exc
        finally:
            theirs.close()
        front = _Link(self, process)
        self._link = front
        await asyncio.get_running_loop().create_unix_connection(lambda: front, sock=ours)
        try:
            await asyncio.wait_for(asyncio.shield(front.ready), FRONT_START)
        except (asyncio.TimeoutError, UnavailableError) as exc:
            self._link = None
            front.ready.cancel()
            if front.transport is not None:
                front.transport.abort()
            process.kill()
            await _ended(process)
            raise UnavailableError(
                f"the lease-socket front did not start (exit status {process.returncode})",
                hint="its line above on the pool's stderr says why",
            ) from exc

    async def _replace(self, process: subprocess.Popen[bytes]) -> None:
        """Start a front in place of ``process``, which died or broke its link."""
        await _ended(process)
        log.error(
            "the lease-socket front exited (status %s); its connections ended; starting another"
            " in %g s",
            process.returncode,
            FRONT_RESTART,
        )
        while not self._closing:
            await asyncio.sleep(FRONT_RESTART)
            try:
                await self._start_front()
                log.info("the lease-socket front serves again")
                return
            except UnavailableError as exc:
                log.error("%s; trying again in %g s", exc.one_line(), FRONT_RESTART)

    def _end_connections(self) -> None:
        connections = list(self._connections.values())
        self._connections.clear()
        for connection in connections:
            connection.end()

    def _queued(self, connection: LeaseConnection) -> None:
        self._to_send.append(connection)
        if not self._flush_due:
            self._flush_due = True
            asyncio.get_running_loop().call_soon(self.flush)


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


async def _ended(process: subprocess.Popen[bytes], within: float = 2.0) -> None:
    """Wait for ``process`` to exit, killing it after ``within`` seconds."""
    for _ in range(int(within / 0.02)):
        if process.poll() is not None:
            return
        await asyncio.sleep(0.02)
    process.kill()
    while process.poll() is None:
        await asyncio.sleep(0.02)
