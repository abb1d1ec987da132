"""The pool's side of the lease socket (docs/lease-socket.md): the lease stream's calls as
length-prefixed protobuf frames on a TCP (or mutual TLS) connection, served by the same
:class:`Leasing` as the gRPC stream; who may connect (a token, or a certificate's role)."""

from __future__ import annotations

import asyncio
import ssl
from typing import Collection

from radium import leasewire, rpc
from radium.config import TlsConfig, parse_address
from radium.errors import (
    AuthError,
    ConfigError,
    RadiumError,
    UnavailableError,
)
from radium.pool.lease_connection import Authorize, LeaseConnection
from radium.pool.leasing import Leasing
from radium.proto import pool_pb2 as pb


def token_authorize(tokens: Collection[str]) -> Authorize:
    """Hellos must carry one of ``tokens`` (the pool's agent tokens)."""
    accepted = [t.encode() for t in tokens if t]

    def authorize(hello: pb.LeaseHello, _: ssl.SSLObject | None) -> RadiumError | None:
        return rpc.token_refused("lease socket", hello.token.encode(), accepted)

    return authorize


def role_authorize(roles: Collection[str]) -> Authorize:
    """The client's certificate (verified by TLS) must be of one of ``roles``."""

    def authorize(_: pb.LeaseHello, tls: ssl.SSLObject | None) -> RadiumError | None:
        der = tls.getpeercert(binary_form=True) if tls is not None else None
        if not der:
            return AuthError("lease socket: no client certificate")
        return rpc.certificate_refused(
            "lease socket", ssl.DER_cert_to_PEM_cert(der).encode(), roles
        )

    return authorize


def server_context(tls: TlsConfig) -> ssl.SSLContext:
    """Mutual TLS with the pool's files: its certificate, and a client's from the CA required."""
    try:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=tls.ca)
        context.load_cert_chain(tls.cert, tls.key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load the TLS files of [pool.tls]: {exc}") from exc
    context.verify_mode = ssl.CERT_REQUIRED
    return context


class LeaseListener:
    """Accepts lease-socket connections and serves each as one lease session
    (:class:`LeaseConnection`); sends what they queued when a commit's answers are told
    (``Commits.told``), or in the next turn."""

    def __init__(
        self, leasing: Leasing, authorize: Authorize, tls: ssl.SSLContext | None = None
    ) -> None:
        self._leasing = leasing
        self._authorize = authorize
        self._tls = tls
        self._server: asyncio.Server | None = None
        self._connections: set[LeaseConnection] = set()
        #: Connections with replies to send: all go out at the end of the batch told, or in
        #: the next turn if none is told first.
        self._to_send: list[LeaseConnection] = []
        self._flush_due = False

    async def start(self, address: str) -> None:
        host, port = parse_address(address, "pool.lease_listen")
        try:
            self._server = await asyncio.get_running_loop().create_server(
                self._connection,
                host,
                port,
                ssl=self._tls,
                ssl_handshake_timeout=leasewire.HELLO_TIMEOUT if self._tls else None,
            )
        except OSError as exc:
            raise UnavailableError(
                f"cannot listen on {address} for the lease socket: {exc.strerror}",
                hint="is another pool running? [pool] lease_listen must be free",
            ) from exc
        self._leasing.pool.commits.told.append(self.flush)

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        """Stop listening and end every connection (the pool stops, or stops leading)."""
        if self._server is not None:
            self._server.close()
        if self.flush in self._leasing.pool.commits.told:
            self._leasing.pool.commits.told.remove(self.flush)
        for connection in list(self._connections):
            connection.abort()
        await asyncio.sleep(0)  # their connection_lost runs in the next turn

    def flush(self) -> None:
        """Send every connection's queued replies."""
        self._flush_due = False
        connections, self._to_send = self._to_send, []
        for connection in connections:
            connection.flush()

    def _connection(self) -> LeaseConnection:
        connection = LeaseConnection(
            self._leasing, self._authorize, self._connections.discard, self._queued
        )
        self._connections.add(connection)
        return connection

    def _queued(self, connection: LeaseConnection) -> None:
        self._to_send.append(connection)
        if not self._flush_due:
            self._flush_due = True
            asyncio.get_running_loop().call_soon(self.flush)
