"""The lease-socket front (docs/lease-front.md): a process the pool starts beside it, which holds
the clients' connections (TCP or mutual TLS), checks their framing, and relays their hellos and
calls to the pool and the pool's answers back, over one Unix socket: the link. It decides
nothing: who may lease, and every call, is the pool's."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
import os
import signal
import socket
import ssl
import sys

from radium import logs
from radium.configtree import TlsConfig
from radium.errors import ConfigError, LeaseWireError, RadiumError
from radium.leaseclient import wire
from radium.pool.leases import link

__all__ = ["PROGRAM", "Client", "Front", "main", "serve", "server_context", "yield_to_the_pool"]

log = logging.getLogger(__name__)
PROGRAM = "radium lease-front"


class Client(wire.Receiver):
    """One client's connection: its hello goes to the pool; once the pool welcomes it, its
    frames go as calls, and what the pool sends for it is written to it."""

    def __init__(self, front: Front, number: int) -> None:
        super().__init__()
        self._front = front
        self.number = number
        self._transport: asyncio.Transport | None = None
        self._peer = ""
        self._magic_seen = False
        self._asked = False  # its hello is with the pool
        self._welcomed = False
        self._deadline: asyncio.TimerHandle | None = None
        #: It does not read what is written to it: its calls are not read either, until it
        #: does, whatever the link does (its replies stay bounded by its calls in flight).
        self._unread = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._peer = str(transport.get_extra_info("peername"))
        wire.keep_alive(transport)
        self._deadline = asyncio.get_running_loop().call_later(
            wire.HELLO_TIMEOUT,
            self._fail,
            LeaseWireError(f"no hello within {wire.HELLO_TIMEOUT:g} s"),
        )
        self._front.clients[self.number] = self
        if self._front.link_full:
            transport.pause_reading()

    def received(self) -> None:
        try:
            if self._welcomed:
                self._relay_calls()
            elif not self._asked:
                self._take_hello()
            elif len(self.buffer) > wire.FRAME_LIMIT:  # sent on before its welcome
                raise LeaseWireError("too much sent before the welcome")
        except LeaseWireError as exc:
            self._fail(exc)

    def _take_hello(self) -> None:
        if not self._magic_seen:
            if len(self.buffer) < len(wire.MAGIC):
                return
            if self.buffer[:4] != wire.MAGIC:
                raise LeaseWireError(
                    f"not a lease-socket client (it began with {bytes(self.buffer[:4])!r})"
                )
            self._magic_seen = True
        body, taken = wire.take_frame(self.buffer, 4, wire.HELLO_LIMIT)
        if body is None:
            return
        del self.buffer[:taken]
        assert self._transport is not None and self._deadline is not None
        self._deadline.cancel()
        tls = self._transport.get_extra_info("ssl_object")
        certificate = (tls.getpeercert(binary_form=True) or b"") if tls is not None else b""
        self._asked = True
        self._front.outbox.put(link.HELLO, self.number, link.hello(self._peer, certificate, body))

    def _relay_calls(self) -> None:
        start, put = 0, self._front.outbox.put
        try:
            while True:
                body, end = wire.take_frame(self.buffer, start, wire.FRAME_LIMIT)
                if body is None:
                    return
                put(link.CALL, self.number, body)
                start = end
        finally:
            del self.buffer[:start]

    def answered(self, kind: int, payload: bytes) -> None:
        """What the pool sent for this connection."""
        transport = self._transport
        if kind == link.SEND:
            if transport is None or transport.is_closing():
                self._front.outbox.put(link.UNSENT, self.number, payload)
            else:
                transport.write(payload)
        elif kind == link.WELCOME and transport is not None:
            transport.write(payload)
            self._welcomed = True
            self.received()  # what it sent after its hello
        elif kind == link.REFUSE and transport is not None:
            transport.write(payload)
            transport.close()
        elif kind == link.CLOSE and transport is not None:
            transport.close()

    def eof_received(self) -> bool:
        if not self._asked and self.buffer:
            self._fail(LeaseWireError("the connection ended before its hello"))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._transport = None
        self._front.clients.pop(self.number, None)
        if self._asked:
            self._front.outbox.put(link.GONE, self.number)

    def pause_writing(self) -> None:  # the client does not read: stop reading its calls
        self._unread = True
        if self._transport is not None:
            self._transport.pause_reading()

    def resume_writing(self) -> None:
        self._unread = False
        if self._transport is not None and not self._front.link_full:
            self._transport.resume_reading()

    def pause_reading(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.pause_reading()

    def resume_reading(self) -> None:
        """The link has room again: read the client's calls, unless it reads none of ours."""
        if self._transport is not None and not self._transport.is_closing() and not self._unread:
            self._transport.resume_reading()

    def _fail(self, error: LeaseWireError) -> None:
        log.warning("lease socket: %s from %s; closed it", error.message, self._peer)
        if self._transport is not None:
            self._transport.close()


class Front(link.LinkEnd):
    """The link's end in the front, and the connections it serves."""

    def __init__(self) -> None:
        super().__init__()
        self.clients: dict[int, Client] = {}
        self.link_full = False
        self.ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._numbers = itertools.count(1)

    def client(self) -> Client:
        number = next(self._numbers) & 0xFFFFFFFF
        while number == 0 or number in self.clients:
            number = next(self._numbers) & 0xFFFFFFFF
        return Client(self, number)

    def received(self) -> None:
        try:
            for kind, number, payload in link.messages(self.buffer, link.FROM_POOL):
                if (client := self.clients.get(number)) is not None:
                    client.answered(kind, payload)
                elif kind == link.SEND:  # it went away meanwhile: its leases go back
                    self.outbox.put(link.UNSENT, number, payload)
        except LeaseWireError as exc:
            log.error("%s; exiting", exc.message)
            self._end()

    def pause_writing(self) -> None:  # the pool does not read: stop reading every client
        self.link_full = True
        for client in self.clients.values():
            client.pause_reading()

    def resume_writing(self) -> None:
        self.link_full = False
        for client in self.clients.values():
            client.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self._end()  # the pool stopped, or went away

    def _end(self) -> None:
        if self.transport is not None:
            self.transport.abort()
        if not self.ended.done():
            self.ended.set_result(None)


async def serve(
    listening: socket.socket, link_end: socket.socket, tls: ssl.SSLContext | None
) -> None:
    """Hold the clients' connections on ``listening`` and relay them over ``link_end`` until the
    pool closes the link."""
    loop = asyncio.get_running_loop()
    front = Front()
    await loop.create_unix_connection(lambda: front, sock=link_end)
    server = await loop.create_server(
        front.client,
        sock=listening,
        ssl=tls,
        ssl_handshake_timeout=wire.HELLO_TIMEOUT if tls else None,
    )
    front.outbox.put(link.READY, 0)
    try:
        await front.ended
    finally:
        server.close()
        for client in list(front.clients.values()):
            client.answered(link.CLOSE, b"")


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROGRAM, description=__doc__)
    parser.add_argument("--listen-fd", type=int, required=True)
    parser.add_argument("--link-fd", type=int, required=True)
    parser.add_argument("--tls-ca", default="")
    parser.add_argument("--tls-cert", default="")
    parser.add_argument("--tls-key", default="")
    return parser.parse_args(argv)


def server_context(tls: TlsConfig) -> ssl.SSLContext:
    """Mutual TLS with the pool's files: its certificate, and a client's from the CA required."""
    try:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=tls.ca)
        context.load_cert_chain(tls.cert, tls.key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load the TLS files of [pool.tls]: {exc}") from exc
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def _tls(args: argparse.Namespace) -> ssl.SSLContext | None:
    if not args.tls_cert:
        return None
    return server_context(TlsConfig(ca=args.tls_ca, cert=args.tls_cert, key=args.tls_key))


def yield_to_the_pool() -> None:
    """Take Linux's batch policy (docs/lease-front.md, "Scheduling"): every write of the pool's
    wakes the front, and a woken task of the normal policy may take the pool's CPU there and
    then, mid-turn, while the pool's calls wait. A batch task never preempts on waking; it runs
    on a free CPU, or once the pool blocks, or at the next tick. Any process may choose it."""
    try:
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    except (AttributeError, OSError) as exc:  # not Linux, or a seccomp filter: it still works
        log.warning("the front keeps the normal scheduling policy: %s", exc)


def main(argv: list[str]) -> int:
    """The front process: ``python -m radium.pool.leases.front --listen-fd N --link-fd M``."""
    logs.setup(PROGRAM, "", stderr_level=logging.INFO)
    # A terminal's Ctrl-C reaches the whole process group: the pool ends the front (it closes
    # the link) once it has ended its own sessions.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    yield_to_the_pool()
    args = _arguments(argv)
    try:
        listening = socket.socket(fileno=args.listen_fd)
        link_end = socket.socket(fileno=args.link_fd)
        asyncio.run(serve(listening, link_end, _tls(args)))
    except RadiumError as exc:
        log.error("%s", exc.one_line())
        return 1
    except OSError as exc:
        log.error("cannot serve the lease socket: %s", exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
