"""One lease-socket connection on the pool's side (docs/lease-socket.md), as the front relays it
(docs/lease-front.md): its hello, then its lease session. No task and no queue per connection:
every call is served as it is received, and its replies go to the front as one frame (a batch)
in the turn that made them: those that needed no commit once what was received is served, the
others once their commit's answers are told (:attr:`radium.pool.store.commits.Commits.told`, which
the listener hooks)."""

from __future__ import annotations

import logging
from typing import Callable, Optional

from radium import rpc
from radium.errors import CapacityError, InvalidRequestError, LeaseWireError, RadiumError
from radium.leaseclient import wire
from radium.pool.leases import link
from radium.pool.leases.leasing import Leasing
from radium.pool.leases.session import LeaseSession
from radium.proto import pool_pb2 as pb

__all__ = ["Authorize", "LeaseConnection", "give_back_unsent"]

log = logging.getLogger(__name__)

#: Decides whether a hello may lease: (the hello, the client's TLS certificate in DER, or
#: empty) -> the refusal.
Authorize = Callable[[pb.LeaseHello, bytes], Optional[RadiumError]]


class LeaseConnection:
    """One client's connection, number ``number`` of the front: what it is sent goes to
    ``outbox``; ``to_send`` is told when it first has replies to send."""

    def __init__(
        self,
        number: int,
        leasing: Leasing,
        outbox: link.Outbox,
        to_send: Callable[[LeaseConnection], None],
    ) -> None:
        self.number = number
        self._leasing = leasing
        self._outbox = outbox
        self._to_send = to_send
        self._session: LeaseSession | None = None  # once welcomed
        self._unsent: list[pb.LeaseReply] = []

    def hello(self, payload: bytes, authorize: Authorize) -> bool:
        """Answer the client's hello (docs/lease-socket.md, "Handshake"); whether it may lease."""
        peer, certificate, body = link.parse_hello(payload)
        try:
            hello = wire.parse(pb.LeaseHello, body)
        except LeaseWireError as exc:
            log.warning("lease socket: %s from %s; closed it", exc.message, peer)
            self._outbox.put(link.CLOSE, self.number)
            return False
        error = authorize(hello, certificate)
        if error is None and hello.version != wire.VERSION:
            error = InvalidRequestError(
                f"lease socket version {hello.version} is not spoken here (only {wire.VERSION})",
                hint="upgrade the node agent and the pool to the same Radium release",
            )
        if error is not None:
            log.warning("lease socket: refused %s: %s", peer, error.one_line())
            code, message = rpc.status_of(error)
            refusal = pb.LeaseWelcome(error=pb.CallError(code=code.value[0], message=message))
            self._outbox.put(link.REFUSE, self.number, wire.frame(refusal))
            return False
        welcome = pb.LeaseWelcome(version=wire.VERSION)
        self._outbox.put(link.WELCOME, self.number, wire.frame(welcome))
        self._session = LeaseSession(self._leasing, self._send)
        return True

    def call(self, body: bytes) -> bool:
        """Serve one frame of calls; False (and the connection is closed) when it is none."""
        assert self._session is not None
        try:
            call = wire.parse(pb.LeaseCall, body)
        except LeaseWireError as exc:
            log.warning("lease socket: %s from connection %d; closed it", exc.message, self.number)
            self._outbox.put(link.CLOSE, self.number)
            self.end()
            return False
        try:
            self._session.serve(call)
        except CapacityError as exc:  # past its window: why goes out as reply 0, then the end
            log.warning(
                "lease socket: %s from connection %d; closed it", exc.one_line(), self.number
            )
            code, message = rpc.status_of(exc)
            ending = pb.LeaseReply(id=0, error=pb.CallError(code=code.value[0], message=message))
            self.flush()
            self._outbox.put(link.SEND, self.number, wire.frame(ending))
            self._outbox.put(link.CLOSE, self.number)
            self.end()
            return False
        return True

    def end(self) -> None:
        """The client went away (or the front did): withdraw its waiting allocations, and give
        back a lease among the replies not sent."""
        if self._session is not None and not self._session.ended:
            self._session.end()
            self.flush()

    def _send(self, reply: pb.LeaseReply) -> None:
        """Queue ``reply``: it goes out with the others of its batch (:meth:`flush`)."""
        if not self._unsent:
            self._to_send(self)
        self._unsent.append(reply)

    def flush(self) -> None:
        """Send the replies queued, as one frame (a few past the batch limit)."""
        if not self._unsent:
            return
        replies, self._unsent = self._unsent, []
        if self._session is not None:
            self._session.sent(len(replies))
        if self._session is not None and self._session.ended:
            for reply in replies:  # never sent: a lease among them is given back
                self._session.deliver(reply)
            return
        self._outbox.put(link.SEND, self.number, wire.batches(replies, rpc.LEASE_BATCH_LIMIT))


def give_back_unsent(leasing: Leasing, payload: bytes) -> None:
    """Replies the front could not write (``UNSENT``: their client had gone): the leases among
    them go back."""
    frames, start = bytearray(payload), 0
    while True:
        body, start = wire.take_frame(frames, start, link.MESSAGE_LIMIT)
        if body is None:
            return
        first = wire.parse(pb.LeaseReply, body)
        for reply in (first, *first.more):
            if reply.WhichOneof("result") == "lease":
                leasing.give_back(reply.lease.id)
