"""One lease-socket connection on the pool's side (docs/lease-socket.md): an asyncio protocol
that reads the hello, then hands each frame's calls to a :class:`LeaseSession` and sends what
it answers. No task and no queue per connection: every call is served as it is received, and
its replies go out as one frame (a batch) in one write, in the same turn: those that needed no
commit once what was received is served, the others once their commit's answers are told
(:attr:`radium.pool.commits.Commits.told`, which the listener hooks)."""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Callable, Optional

from radium import leasewire, rpc
from radium.errors import InvalidRequestError, LeaseWireError, RadiumError
from radium.pool.lease_session import LeaseSession
from radium.pool.leasing import Leasing
from radium.proto import pool_pb2 as pb

log = logging.getLogger(__name__)

#: Decides whether a hello may lease: (the hello, the connection's TLS object) -> the refusal.
Authorize = Callable[[pb.LeaseHello, Optional[ssl.SSLObject]], Optional[RadiumError]]


class LeaseConnection(leasewire.Receiver):
    """One client's connection: its handshake, then its lease session; ``gone`` is told when
    it has ended."""

    def __init__(
        self,
        leasing: Leasing,
        authorize: Authorize,
        gone: Callable[[LeaseConnection], None],
        to_send: Callable[[LeaseConnection], None],
    ) -> None:
        super().__init__()
        self._leasing = leasing
        self._authorize = authorize
        self._gone = gone
        self._to_send = to_send
        self._transport: asyncio.Transport | None = None
        self._peer: object = None
        self._magic_seen = False
        self._session: LeaseSession | None = None  # once welcomed
        self._unsent: list[pb.LeaseReply] = []
        self._hello_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._peer = transport.get_extra_info("peername")
        leasewire.keep_alive(transport)
        self._hello_deadline = asyncio.get_running_loop().call_later(
            leasewire.HELLO_TIMEOUT,
            self._fail,
            LeaseWireError(f"no hello within {leasewire.HELLO_TIMEOUT:g} s"),
        )

    def abort(self) -> None:
        """End the connection now (the pool stops, or stops leading)."""
        if self._transport is not None:
            self._transport.abort()

    def received(self) -> None:
        if self._transport is None or self._transport.is_closing():
            return
        try:
            taken = self._take_calls(0) if self._session is not None else self._take_hello()
        except LeaseWireError as exc:
            self._fail(exc)
            return
        del self.buffer[:taken]
        self.flush()  # the answers that needed no commit

    def eof_received(self) -> bool:
        # A socket's end reads the same whether the client shut down its sending side or went
        # away: taken as gone, as a cancelled gRPC stream (docs/lease-socket.md).
        if self._session is None and self.buffer:
            self._fail(LeaseWireError("the connection ended before its hello"))
        return False  # asyncio closes the transport: connection_lost ends the session

    def connection_lost(self, exc: Exception | None) -> None:
        if self._hello_deadline is not None:
            self._hello_deadline.cancel()
        if self._session is not None:
            self._session.end()
            self.flush()  # nothing goes out now: a lease among them is given back
        self._gone(self)

    def pause_writing(self) -> None:  # the client does not read: stop reading its calls
        if self._transport is not None:
            self._transport.pause_reading()

    def resume_writing(self) -> None:
        if self._transport is not None:
            self._transport.resume_reading()

    def _take_hello(self) -> int:
        """Read the magic and the hello (docs/lease-socket.md, "Handshake"), answer it, then
        serve what came after it; how many bytes of the buffer were used."""
        if not self._magic_seen:
            if len(self.buffer) < len(leasewire.MAGIC):
                return 0
            if self.buffer[:4] != leasewire.MAGIC:
                raise LeaseWireError(
                    f"not a lease-socket client (it began with {bytes(self.buffer[:4])!r})"
                )
            self._magic_seen = True
        body, taken = leasewire.take_frame(self.buffer, 4, leasewire.HELLO_LIMIT)
        if body is None:
            return 0
        hello = leasewire.parse(pb.LeaseHello, body)
        assert self._transport is not None and self._hello_deadline is not None
        self._hello_deadline.cancel()
        error = self._authorize(hello, self._transport.get_extra_info("ssl_object"))
        if error is None and hello.version != leasewire.VERSION:
            error = InvalidRequestError(
                f"lease socket version {hello.version} is not spoken here (only "
                f"{leasewire.VERSION})",
                hint="upgrade the node agent and the pool to the same Radium release",
            )
        if error is not None:
            log.warning("lease socket: refused %s: %s", self._peer, error.one_line())
            code, message = rpc.status_of(error)
            refusal = pb.CallError(code=code.value[0], message=message)
            self._transport.write(leasewire.frame(pb.LeaseWelcome(error=refusal)))
            self._transport.close()
            return len(self.buffer)
        self._transport.write(leasewire.frame(pb.LeaseWelcome(version=leasewire.VERSION)))
        self._session = LeaseSession(self._leasing, self._send)
        return self._take_calls(taken)

    def _take_calls(self, start: int) -> int:
        assert self._session is not None
        while True:
            body, end = leasewire.take_frame(self.buffer, start, leasewire.FRAME_LIMIT)
            if body is None:
                return start
            self._session.serve(leasewire.parse(pb.LeaseCall, body))
            start = end

    def _send(self, reply: pb.LeaseReply) -> None:
        """Queue ``reply``: it goes out with the others of its batch (:meth:`flush`)."""
        if not self._unsent:
            self._to_send(self)
        self._unsent.append(reply)

    def flush(self) -> None:
        """Send the replies queued, as one frame (a few past the batch limit) in one write."""
        if not self._unsent:
            return
        replies, self._unsent = self._unsent, []
        if self._transport is None or self._transport.is_closing():
            assert self._session is not None
            self._session.ended = True
            for reply in replies:  # never sent: a lease among them is given back
                self._session.deliver(reply)
            return
        self._transport.write(leasewire.batches(replies, rpc.LEASE_BATCH_LIMIT))

    def _fail(self, error: LeaseWireError) -> None:
        log.warning("lease socket: %s from %s; closed it", error.message, self._peer)
        if self._transport is not None:
            self._transport.close()
