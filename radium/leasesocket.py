"""The client side of the lease socket (docs/lease-socket.md): the lease calls as frames on a TCP
(or mutual TLS) connection to the leading pool replica, opened on first use and again after it
breaks."""

from __future__ import annotations

import asyncio
import os
import ssl

from radium import leasewire, rpc
from radium.config import TlsConfig, parse_addresses
from radium.errors import AuthError, ConfigError, RadiumError, UnavailableError
from radium.leasecalls import LeaseCalls
from radium.proto import pool_pb2 as pb

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


class LeaseSocket(LeaseCalls):
    """Lease calls of one client on one lease-socket connection. Every call has a deadline;
    calls in flight when the connection breaks fail with :class:`UnavailableError`, and the
    next call connects again through the address list (the leading replica listens)."""

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
        self._hello = pb.LeaseHello(version=leasewire.VERSION, token="" if enabled else token)
        self._context: ssl.SSLContext | None = None
        self._server_name: str | None = None
        if tls is not None and enabled:
            from radium import certs  # cryptography: only for TLS

            self._context, self._server_name = client_context(tls), certs.POOL_NAME
        self._run_task: asyncio.Task[None] | None = None
        #: The outcome of the open connection's handshake: None (welcomed) or the refusal.
        self._welcomed: asyncio.Future[RadiumError | None] | None = None
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

    async def _run(self, welcomed: asyncio.Future[RadiumError | None]) -> None:
        """One connection: dial, handshake, then read replies until it ends."""
        error: RadiumError = UnavailableError(f"{self._service}: the lease socket was closed")
        writer: asyncio.StreamWriter | None = None
        sending: asyncio.Task[None] | None = None
        try:
            reader, writer = await self._dial()
            welcomed.set_result(None)
            sending = asyncio.create_task(self._write(writer))
            limit = leasewire.FRAME_LIMIT
            while (reply := await leasewire.read_frame(reader, pb.LeaseReply, limit)) is not None:
                self._receive(reply)
            error = UnavailableError(f"{self._service}: the pool closed the lease socket")
        except RadiumError as exc:
            error = exc
        except (OSError, ssl.SSLError) as exc:
            error = UnavailableError(
                f"{self._service}: the lease socket broke ({exc or type(exc).__name__})",
                hint=_DOWN_HINT,
            )
        finally:
            if sending is not None:
                sending.cancel()
            if writer is not None:
                writer.close()
            if not welcomed.done():
                welcomed.set_result(error)
            self._fail_pending(error)

    async def _dial(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """The first address, in order, that accepts and welcomes us."""
        failures = []
        for host, port in self._addresses:
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(
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
                await self._handshake(reader, writer)
            except BaseException:
                writer.close()
                raise
            return reader, writer
        raise UnavailableError(
            f"{self._service}: no lease socket accepts ({'; '.join(failures)})", hint=_DOWN_HINT
        )

    async def _handshake(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        leasewire.keep_alive(writer)
        writer.write(leasewire.MAGIC + leasewire.frame(self._hello))
        try:
            welcome = await asyncio.wait_for(
                leasewire.read_frame(reader, pb.LeaseWelcome, leasewire.HELLO_LIMIT),
                self._timeout,
            )
        except asyncio.TimeoutError:
            raise self._deadline(f"no welcome within {self._timeout:g}s") from None
        except (OSError, ssl.SSLError, RadiumError) as exc:
            welcome = None
            if not self._tls:
                raise UnavailableError(
                    f"{self._service}: the lease socket broke in its handshake ({exc})",
                    hint=_PLAIN_HINT,
                ) from exc
        if welcome is None and self._tls:  # the pool ended the handshake: our certificate
            raise AuthError(
                f"{self._service}: refused this node's certificate (another CA's, or expired)",
                hint=_TLS_HINT,
            )
        if welcome is None:
            raise UnavailableError(
                f"{self._service}: the pool closed the lease socket before its welcome",
                hint=_PLAIN_HINT,
            )
        if welcome.HasField("error"):
            raise rpc.from_status(welcome.error.code, welcome.error.message, self._service)

    async def _write(self, writer: asyncio.StreamWriter) -> None:
        """Send what is queued, what piled up behind the last write in one frame, until the
        connection breaks (the reader then fails the calls)."""
        try:
            while True:
                call = await self._outbox.get()
                call.more.extend(rpc.queued_for_batch(self._outbox))
                writer.write(leasewire.frame(call))
                await writer.drain()
        except (OSError, ssl.SSLError):
            return

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
