"""The client side of the lease stream (docs/lease-stream.md): allocate, keep-alive and release
as messages on one gRPC stream, opened on first use and again after it breaks."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import grpc.aio

from radium import rpc
from radium.errors import RadiumError, UnavailableError
from radium.leaseclient.calls import LeaseCalls
from radium.proto import pool_pb2 as pb
from radium.proto import pool_pb2_grpc as pb_grpc

__all__ = ["LeaseStream"]

_LOST_STATUS = "Internal error from Core"


class LeaseStream(LeaseCalls):
    """Lease calls of one client, multiplexed on one stream of ``channel``. Every call has a
    deadline; calls in flight when the stream breaks fail with :class:`UnavailableError`, and
    the next call opens a new stream (on the channel's current replica)."""

    def __init__(
        self,
        channel: grpc.aio.Channel,
        metadata: tuple[tuple[str, str], ...],
        service: str,
        timeout: float = 5.0,
        tls: bool = False,
    ) -> None:
        super().__init__(service, timeout, tls)
        self._stub = pb_grpc.PoolStub(channel)
        self._metadata = (*metadata, rpc.LEASE_BATCHES)  # we take batched replies
        self._call: Any = None  # the open grpc.aio stream-stream call
        #: The call the pool accepted (sent its initial metadata): our certificate was taken.
        self._accepted: Any = None
        self._reader: asyncio.Task[None] | None = None
        #: Calls to send: one task writes them (one write at a time per stream).
        self._outbox: asyncio.Queue[pb.LeaseCall] = asyncio.Queue()
        #: Writes the outbox: a gRPC write cancelled half-way would cancel the whole stream.
        self._writer: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        """Open the stream now rather than on the first call (its set-up is then not a call's),
        and wait until the pool has accepted it."""
        self._open()
        try:
            await asyncio.wait_for(self._call.initial_metadata(), self._timeout)
            if self._call.done():  # refused instead
                code, details = await self._call.code(), await self._call.details()
                raise rpc.from_code(code, details, self._service, self._tls)
        except grpc.RpcError as exc:
            raise rpc.from_rpc_error(exc, self._service, self._tls) from exc
        except asyncio.TimeoutError:
            raise self._deadline(f"no lease stream within {self._timeout:g}s") from None

    def _open(self) -> None:
        if self._reader is None or self._reader.done():
            if self._writer is not None:
                self._writer.cancel()
            self._call = self._stub.Leases(metadata=self._metadata)
            self._reader = asyncio.create_task(self._read(self._call))
            self._writer = asyncio.create_task(self._write(self._call))

    def _send(self, call: pb.LeaseCall) -> None:
        self._outbox.put_nowait(call)

    def _fail_pending(self, error: RadiumError) -> None:
        while not self._outbox.empty():  # unsent: their callers fail with the rest
            self._outbox.get_nowait()
        super()._fail_pending(error)

    async def _write(self, stream: Any) -> None:
        """Send what is queued until the stream breaks (its reader then fails the calls)."""
        try:
            # Not before the pool accepted the stream (it sends its initial metadata then): a
            # write racing a refusal would turn the refusal into grpc's INTERNAL status.
            self.batching = rpc.takes_lease_batches(await stream.initial_metadata())
            self._accepted = stream
            while True:
                call = await self._outbox.get()
                if self.batching:  # what piled up behind the last write goes in this message
                    call.more.extend(rpc.queued_for_batch(self._outbox))
                await stream.write(call)
        except (grpc.RpcError, asyncio.InvalidStateError):
            return

    async def _read(self, stream: Any) -> None:
        error: RadiumError
        try:
            while (message := await stream.read()) is not grpc.aio.EOF:
                self._receive(message)
            error = UnavailableError(f"{self._service}: the pool ended the lease stream")
        except grpc.RpcError as exc:
            refusal_possible = self._tls and self._accepted is not stream
            error = rpc.from_rpc_error(exc, self._service, refusal_possible)
            if exc.code() == grpc.StatusCode.INTERNAL and _LOST_STATUS in str(exc.details()):
                # grpc-aio's own status for a write to a call the pool had just ended (it
                # stopped, or lost its leadership): why it ended is lost with it.
                error = UnavailableError(
                    f"{self._service}: the pool ended the lease stream as a call was sent",
                    hint="is the pool running? the next call opens a new stream",
                )
        except asyncio.CancelledError:
            error = UnavailableError(f"{self._service}: the lease stream was closed")
            self._fail_pending(error)
            raise
        self._fail_pending(error)

    async def close(self) -> None:
        if self._call is not None:
            self._call.cancel()
        tasks = [t for t in (self._reader, self._writer) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._call = self._reader = self._writer = None
