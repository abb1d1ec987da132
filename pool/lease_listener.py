"""The pool's side of the lease socket (docs/lease-socket.md): the lease stream's calls as
length-prefixed protobuf frames on a TCP (or mutual TLS) connection, served by the same
:class:`Leasing` as the gRPC stream."""

from __future__ import annotations

import asyncio
import hmac
import logging
import ssl
from typing import AsyncIterator, Callable, Collection, Optional

from radium import leasewire, rpc
from radium.config import TlsConfig
from radium.errors import (
    AuthError,
    ConfigError,
    InvalidRequestError,
    LeaseWireError,
    RadiumError,
    UnavailableError,
)
from radium.pool.leasing import Leasing
from radium.proto import pool_pb2 as pb

log = logging.getLogger(__name__)

#: Decides whether a hello may lease: (the hello, the connection's TLS object) -> the refusal.
Authorize = Callable[[pb.LeaseHello, Optional[ssl.SSLObject]], Optional[RadiumError]]


def token_authorize(tokens: Collection[str]) -> Authorize:
    """Hellos must carry one of ``tokens`` (the pool's agent tokens)."""
    accepted = [t.encode() for t in tokens if t]

    def authorize(hello: pb.LeaseHello, _: ssl.SSLObject | None) -> RadiumError | None:
        token = hello.token.encode()
        if token and any(hmac.compare_digest(token, good) for good in accepted):
            return None
        return AuthError(f"lease socket: token not accepted ({'wrong' if token else 'no'} token)")

    return authorize


def role_authorize(roles: Collection[str]) -> Authorize:
    """The client's certificate (verified by TLS) must be of one of ``roles``."""
    from radium import certs

    def authorize(_: pb.LeaseHello, tls: ssl.SSLObject | None) -> RadiumError | None:
        der = tls.getpeercert(binary_form=True) if tls is not None else None
        if not der:
            return AuthError("lease socket: no client certificate")
        try:
            role, name = certs.identity(ssl.DER_cert_to_PEM_cert(der).encode())
        except RadiumError as exc:
            return exc
        if role in roles:
            return None
        return rpc.role_refused("lease socket", role, name, roles)

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
    """Accepts lease-socket connections and serves each as one lease session."""

    def __init__(
        self, leasing: Leasing, authorize: Authorize, tls: ssl.SSLContext | None = None
    ) -> None:
        self._leasing = leasing
        self._authorize = authorize
        self._tls = tls
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self, address: str) -> None:
        host, _, port = address.rpartition(":")
        if not port.isdigit():
            raise InvalidRequestError(f"lease socket address {address!r} is not host:port")
        try:
            self._server = await asyncio.start_server(
                self._serve,
                host.strip("[]") or None,
                int(port),
                ssl=self._tls,
                ssl_handshake_timeout=leasewire.HELLO_TIMEOUT if self._tls else None,
            )
        except OSError as exc:
            raise UnavailableError(
                f"cannot listen on {address} for the lease socket: {exc.strerror}",
                hint="is another pool running? [pool] lease_listen must be free",
            ) from exc

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        """Stop listening and end every connection (the pool stops, or stops leading)."""
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peer = writer.get_extra_info("peername")
        leasewire.keep_alive(writer)
        try:
            if await self._welcome(reader, writer):
                await self._lease(reader, writer)
        except LeaseWireError as exc:
            log.warning("lease socket: %s from %s; closed it", exc.message, peer)
        except RadiumError as exc:
            log.warning("lease socket: connection from %s ended: %s", peer, exc.one_line())
        except (ConnectionError, asyncio.TimeoutError, ssl.SSLError) as exc:
            log.info("lease socket: connection from %s ended: %s", peer, exc or type(exc).__name__)
        finally:
            self._connections.discard(task)
            writer.close()

    async def _welcome(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Read the hello (docs/lease-socket.md, "Handshake"); answer it; True when accepted."""
        try:
            magic = await asyncio.wait_for(reader.readexactly(4), leasewire.HELLO_TIMEOUT)
        except asyncio.IncompleteReadError as exc:
            raise LeaseWireError("the connection ended before its hello") from exc
        if magic != leasewire.MAGIC:
            raise LeaseWireError(f"not a lease-socket client (it began with {magic!r})")
        hello = await asyncio.wait_for(
            leasewire.read_frame(reader, pb.LeaseHello, leasewire.HELLO_LIMIT),
            leasewire.HELLO_TIMEOUT,
        )
        if hello is None:
            raise LeaseWireError("the connection ended before its hello")
        error = self._authorize(hello, writer.get_extra_info("ssl_object"))
        if error is None and hello.version != leasewire.VERSION:
            error = InvalidRequestError(
                f"lease socket version {hello.version} is not spoken here (only "
                f"{leasewire.VERSION})",
                hint="upgrade the node agent and the pool to the same Radium release",
            )
        if error is not None:
            log.warning("lease socket: refused %s: %s", writer.get_extra_info("peername"), error)
            code, message = rpc.status_of(error)
            refusal = pb.CallError(code=code.value[0], message=message)
            writer.write(leasewire.frame(pb.LeaseWelcome(error=refusal)))
            await writer.drain()
            return False
        writer.write(leasewire.frame(pb.LeaseWelcome(version=leasewire.VERSION)))
        return True

    async def _lease(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async def calls() -> AsyncIterator[pb.LeaseCall]:
            limit = leasewire.FRAME_LIMIT
            while (call := await leasewire.read_frame(reader, pb.LeaseCall, limit)) is not None:
                yield call
            # A socket's end reads the same whether the client shut down its sending side or
            # went away: taken as gone, as a cancelled gRPC stream (docs/lease-socket.md).
            raise _Gone

        replies = self._leasing.session(calls(), batches=True)
        try:
            async for reply in replies:
                writer.write(leasewire.frame(reply))
                await writer.drain()
        except _Gone:
            return
        finally:
            await replies.aclose()  # at once: its finally withdraws what still waits


class _Gone(Exception):
    """The client closed its connection (not an error: how every session ends)."""
