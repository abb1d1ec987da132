"""The client side of the lease socket (docs/lease-socket.md): the lease calls as frames on a TCP
(or mutual TLS) connection to the leading pool replica, opened on first use and again after it
breaks."""

from __future__ import annotations

import asyncio
import os
import ssl
from typing import Callable, cast

from radium import rpc
from radium.addresses import parse_addresses
from radium.configtree import TlsConfig
from radium.errors import (
    AuthError,
    ConfigError,
    LeaseWireError,
    RadiumError,
    UnavailableError,
)
from radium.leaseclient import wire
from radium.leaseclient.calls import LeaseCalls
from radium.proto import pool_pb2 as pb

__all__ = ["LeaseSocket", "client_context"]

_TLS_HINT = "check the tls ca, cert and key in the Radium config (radium certs issue)"
_DOWN_HINT = "is the pool running, and [pool] lease_listen one of [client] leases?"
_PLAIN_HINT = "does the pool want TLS ([client.tls])? is [client] leases its lease socket?"


def client_context(tls: TlsConfig) -> ssl.SSLContext:
    """Mutual TLS: the pool must hold a pool's certificate from our CA, and we show ours."""
    try:
        context = ssl.create_default_context(cafile=tls.ca)
        context.load_cert_chain(tls.cert, tls.key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load the TLS files of [client.tls]: {exc}") from exc
    context.check_hostname = True
    context.hostname_checks_common_name = False
    return context


class _Connection(wire.Receiver):
    """One lease-socket connection, the client's end: the pool's welcome (:attr:`welcome`), then
    its replies, each handed to ``receive`` as it is read; :attr:`closed` tells how it ended.
    No task of its own: a reply is handed on as it is received."""

    def __init__(self, receive: Callable[[pb.LeaseReply], None]) -> None:
        super().__init__()
        self._receive = receive
        self._error: LeaseWireError | None = None
        loop = asyncio.get_running_loop()
        #: The welcome, or how the connection ended before it (None: a clean end).
        self.welcome: asyncio.Future[pb.LeaseWelcome | BaseException | None] = loop.create_future()
        #: How the connection ended: None (the pool closed it), or what broke it.
        self.closed: asyncio.Future[BaseException | None] = loop.create_future()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def received(self) -> None:
        start = 0
        try:
            if not self.welcome.done():
                body, start = wire.take_frame(self.buffer, 0, wire.HELLO_LIMIT)
                if body is None:
                    return
                self.welcome.set_result(wire.parse(pb.LeaseWelcome, body))
            while True:
                body, end = wire.take_frame(self.buffer, start, wire.FRAME_LIMIT)
                if body is None:
                    break
                self._receive(wire.parse(pb.LeaseReply, body))
                start = end
        except LeaseWireError as exc:
            self._error = exc
            assert self.transport is not None
            self.transport.abort()  # connection_lost tells of the error
            return
        del self.buffer[:start]

    def connection_lost(self, exc: Exception | None) -> None:
        outcome = self._error or exc
        if not self.welcome.done():
            self.welcome.set_result(outcome)
        if not self.closed.done():
            self.closed.set_result(outcome)


class LeaseSocket(LeaseCalls):
    """Lease calls of one client on one lease-socket connection. Every call has a deadline;
    calls in flight when the connection breaks fail with :class:`UnavailableError`, and the
    next call connects again through the address list (the leading replica listens). The calls
    of one loop turn leave as one frame in one write (a batch), as the pool's replies do."""

    def __init__(
        self,
        where: str,
        token: str,
        service: str,
        timeout: float = 5.0,
        tls: TlsConfig | None = None,
    ) -> None:
        enabled = tls is not None and tls.enabled
        super().__init__(service, timeout, enabled)
        self._addresses = parse_addresses(where, "client.leases")
        self._hello = pb.LeaseHello(version=wire.VERSION, token="" if enabled else token)
        self._context: ssl.SSLContext | None = None
        self._server_name: str | None = None
        if tls is not None and enabled:
            from radium import certs  # cryptography: only for TLS

            self._context, self._server_name = client_context(tls), certs.POOL_NAME
        self._run_task: asyncio.Task[None] | None = None
        #: The outcome of the open connection's handshake: None (welcomed) or the refusal.
        self._welcomed: asyncio.Future[RadiumError | None] | None = None
        #: The welcomed connection calls go on; None while there is none.
        self._connection: _Connection | None = None
        #: Calls to send in this turn's write (or once a connection is welcomed).
        self._unsent: list[pb.LeaseCall] = []
        self.batching = True  # always, on this carriage

    async def connect(self) -> None:
        """Connect now rather than on the first call, and wait for the pool's welcome."""
        self._open()
        assert self._welcomed is not None
        error = await self._welcomed
        if error is not None:
            raise error

    def _open(self) -> None:
        if self._run_task is None or self._run_task.done():
            self._welcomed = asyncio.get_running_loop().create_future()
            self._run_task = asyncio.create_task(self._run(self._welcomed))

    def _send(self, call: pb.LeaseCall) -> None:
        self._unsent.append(call)
        if len(self._unsent) == 1 and self._connection is not None:
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        """Write the calls waiting to go, as one frame (or a few: the batch limit)."""
        connection = self._connection
        if connection is None or not self._unsent:
            return  # sent once a connection is welcomed
        calls, self._unsent = self._unsent, []
        assert connection.transport is not None
        connection.transport.write(wire.batches(calls, rpc.LEASE_BATCH_LIMIT))

    def _fail_pending(self, error: RadiumError) -> None:
        self._unsent.clear()  # their callers fail with the rest
        super()._fail_pending(error)

    async def _run(self, welcomed: asyncio.Future[RadiumError | None]) -> None:
        """One connection: dial and handshake, then serve calls until it ends."""
        error: RadiumError = UnavailableError(f"{self._service}: the lease socket was closed")
        connection: _Connection | None = None
        try:
            connection = await self._dial()
            welcomed.set_result(None)
            self._connection = connection
            self._flush()  # what was called while it connected
            ended = await connection.closed
            if isinstance(ended, RadiumError):
                error = ended
            elif ended is not None:
                error = UnavailableError(
                    f"{self._service}: the lease socket broke ({ended or type(ended).__name__})",
                    hint=_DOWN_HINT,
                )
            else:
                error = UnavailableError(f"{self._service}: the pool closed the lease socket")
        except RadiumError as exc:
            error = exc
        finally:
            self._connection = None
            if connection is not None and connection.transport is not None:
                connection.transport.close()
            if not welcomed.done():
                welcomed.set_result(error)
            self._fail_pending(error)

    async def _dial(self) -> _Connection:
        """The first address, in order, that accepts and welcomes us."""
        loop = asyncio.get_running_loop()
        failures = []
        for host, port in self._addresses:
            try:
                _, connection = await asyncio.wait_for(
                    loop.create_connection(
                        lambda: _Connection(self._receive),
                        host,
                        port,
                        ssl=self._context,
                        server_hostname=self._server_name,
                    ),
                    self._timeout,
                )
            except ssl.SSLCertVerificationError as exc:
                raise AuthError(
                    f"{self._service}: TLS handshake failed (its certificate is not from our "
                    f"CA, or not a pool's: {exc.verify_message})",
                    hint=_TLS_HINT,
                ) from exc
            except (OSError, asyncio.TimeoutError) as exc:
                failures.append(f"{host}:{port}: {_reason(exc)}")
                continue
            try:
                await self._handshake(connection)
            except BaseException:
                assert connection.transport is not None
                connection.transport.close()
                raise
            return connection
        raise UnavailableError(
            f"{self._service}: no lease socket accepts ({'; '.join(failures)})", hint=_DOWN_HINT
        )

    async def _handshake(self, connection: _Connection) -> None:
        assert connection.transport is not None
        wire.keep_alive(connection.transport)
        connection.transport.write(wire.MAGIC + wire.frame(self._hello))
        try:
            outcome = await asyncio.wait_for(connection.welcome, self._timeout)
        except asyncio.TimeoutError:
            raise self._deadline(f"no welcome within {self._timeout:g}s") from None
        if isinstance(outcome, BaseException) and not self._tls:
            raise UnavailableError(
                f"{self._service}: the lease socket broke in its handshake ({outcome})",
                hint=_PLAIN_HINT,
            ) from outcome
        if not isinstance(outcome, pb.LeaseWelcome):
            if self._tls:  # the pool ended the handshake: our certificate
                raise AuthError(
                    f"{self._service}: refused this node's certificate (another CA's, or expired)",
                    hint=_TLS_HINT,
                )
            raise UnavailableError(
                f"{self._service}: the pool closed the lease socket before its welcome",
                hint=_PLAIN_HINT,
            )
        if outcome.HasField("error"):
            raise rpc.from_status(outcome.error.code, outcome.error.message, self._service)

    async def close(self) -> None:
        if self._run_task is not None:
            self._run_task.cancel()
            await asyncio.gather(self._run_task, return_exceptions=True)
        self._run_task = None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return "no answer"
    if isinstance(exc, OSError) and exc.errno:  # asyncio's own words name no reason
        return os.strerror(exc.errno).lower()
    return str(exc) or type(exc).__name__
