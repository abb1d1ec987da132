"""A blocking client of the pool, for the CLI and the node agent. Every call has a deadline."""

from __future__ import annotations

from typing import Iterator, Mapping

import grpc

from radium import rpc
from radium.configtree import ClientConfig, TlsConfig
from radium.proto import pool_pb2 as pb
from radium.proto import pool_pb2_grpc as pb_grpc

__all__ = ["PoolClient"]


class PoolClient:
    """The pool's gRPC calls as the command line and the acceptor make them."""

    def __init__(
        self, address: str, token: str, timeout: float = 5.0, tls: TlsConfig | None = None
    ) -> None:
        """A client of the pool at ``address``, with a token or (``tls``) a certificate."""
        self.address = address
        self._tls = tls is not None and tls.enabled
        self._channel = rpc.channel(address, tls)
        self._stub = pb_grpc.PoolStub(self._channel)
        self._queues = pb_grpc.QueuesStub(self._channel)
        self._metadata = rpc.metadata(token)
        self._timeout = timeout

    @classmethod
    def of(cls, settings: ClientConfig) -> PoolClient:
        """The client a node's ``[client]`` config describes."""
        return cls(settings.pool, settings.token, settings.timeout, settings.tls)

    def _call(
        self, method: str, request: object, timeout: float | None = None, stub: object = None
    ) -> object:
        try:
            return getattr(stub or self._stub, method)(
                request, timeout=timeout or self._timeout, metadata=self._metadata
            )
        except grpc.RpcError as exc:
            raise rpc.from_rpc_error(exc, f"pool at {self.address}", self._tls) from exc

    def allocate(
        self,
        *,
        gpus: int = 0,
        fraction: float = 0.0,
        memory_mib: int = 0,
        selector: Mapping[str, str] | None = None,
        holder: str = "",
        queue: str = "",
        priority: str = "",
        ttl: int = 0,
        wait: float = 0.0,
    ) -> pb.Lease:
        request = pb.AllocateRequest(
            gpus=gpus,
            fraction=fraction,
            memory_mib=memory_mib,
            selector=dict(selector or {}),
            holder=holder,
            queue=queue,
            priority=priority,
            ttl_seconds=ttl,
            wait_seconds=wait,
        )
        lease = self._call("Allocate", request, timeout=self._timeout + wait)
        assert isinstance(lease, pb.Lease)
        return lease

    def keep_alive(self, lease_id: str) -> float:
        response = self._call("KeepAlive", pb.LeaseRef(lease_id=lease_id))
        assert isinstance(response, pb.KeepAliveResponse)
        return response.expires_at

    def release(self, lease_id: str) -> bool:
        response = self._call("Release", pb.LeaseRef(lease_id=lease_id))
        assert isinstance(response, pb.ReleaseResponse)
        return response.released

    def leases(self, *, all_: bool = False, ended_most: int = 0) -> list[pb.Lease]:
        """The active leases, and with ``all_`` the ended ones, newest first: every one the
        pool keeps, read a page at a time, or (``ended_most``) the first page of at most that
        many."""
        request = pb.ListLeasesRequest(all=all_, page_size=ended_most)
        leases: list[pb.Lease] = []
        while True:
            response = self._call("ListLeases", request)
            assert isinstance(response, pb.ListLeasesResponse)
            leases += response.leases
            if ended_most or not response.next_page_token:
                return leases
            request.page_token = response.next_page_token

    def status(self) -> pb.StatusResponse:
        response = self._call("Status", pb.StatusRequest())
        assert isinstance(response, pb.StatusResponse)
        return response

    def _stream(self, method: str, request: object, timeout: float) -> Iterator[object]:
        try:
            yield from getattr(self._stub, method)(
                request, timeout=timeout, metadata=self._metadata
            )
        except grpc.RpcError as exc:
            raise rpc.from_rpc_error(exc, f"pool at {self.address}", self._tls) from exc

    def add_image(self, ref: str, timeout: float = 3600.0) -> Iterator[pb.ImageProgress]:
        """Register ``ref``; each acceptor's progress until all have pulled it (or failed)."""
        for update in self._stream("AddImage", pb.ImageRef(ref=ref), timeout):
            assert isinstance(update, pb.ImageProgress)
            yield update

    def remove_image(self, ref: str, timeout: float = 3600.0) -> Iterator[pb.ImageProgress]:
        for update in self._stream("RemoveImage", pb.ImageRef(ref=ref), timeout):
            assert isinstance(update, pb.ImageProgress)
            yield update

    def list_images(self) -> list[pb.ImageStatus]:
        response = self._call("ListImages", pb.ListImagesRequest())
        assert isinstance(response, pb.ListImagesResponse)
        return list(response.images)

    def set_queue(self, queue: pb.Queue, *, create: bool) -> pb.Queue:
        """Add a queue (``create``: it must not exist) or change one (it must exist)."""
        change = pb.QueueChange(queue=queue, create=create)
        answer = self._call("SetQueue", change, stub=self._queues)
        assert isinstance(answer, pb.Queue)
        return answer

    def remove_queue(self, name: str) -> pb.Queue:
        answer = self._call("RemoveQueue", pb.QueueRef(name=name), stub=self._queues)
        assert isinstance(answer, pb.Queue)
        return answer

    def queues(self) -> list[pb.QueueStatus]:
        answer = self._call("ListQueues", pb.ListQueuesRequest(), stub=self._queues)
        assert isinstance(answer, pb.ListQueuesResponse)
        return list(answer.queues)

    def close(self) -> None:
        self._channel.close()
