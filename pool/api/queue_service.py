"""`radium queues`: the Queues gRPC service (docs/scheduling.md)."""

from __future__ import annotations

from radium.errors import AlreadyExistsError, InvalidRequestError
from radium.pool.api.service import Context
from radium.pool.core import convert, queues
from radium.pool.core.dispatcher import Dispatcher
from radium.pool.model import DEFAULT_QUEUE
from radium.proto import pool_pb2 as pb
from radium.proto import pool_pb2_grpc as pb_grpc

__all__ = ["QueueService"]


class QueueService(pb_grpc.QueuesServicer):
    """The Queues gRPC service: `radium queues` sets, removes and lists the pool's queues."""

    def __init__(self, pool: Dispatcher) -> None:
        self.pool = pool

    async def SetQueue(self, request: pb.QueueChange, context: Context) -> pb.Queue:
        state = self.pool.state
        configured = dict(state.queues.by_name)
        queue = queues.checked(convert.queue_from_pb(request.queue), configured)
        exists = queue.name in configured or queue.name == DEFAULT_QUEUE
        if request.create and queue.name in configured:
            raise AlreadyExistsError(
                f"queue {queue.name!r} exists", hint="change it with `radium queues set`"
            )
        if not request.create and not exists:
            raise InvalidRequestError(
                f"no queue {queue.name!r}", hint="add it with `radium queues add`"
            )
        configured[queue.name] = queue
        state.store.save_queue(queue)
        state.set_queues(queues.Queues(configured.values()))
        self.pool.serve_waiters()  # a larger share or limit may let someone in
        return convert.queue_to_pb(queue)

    async def RemoveQueue(self, request: pb.QueueRef, context: Context) -> pb.Queue:
        state = self.pool.state
        queue = state.queues.by_name.get(request.name)
        if queue is None:
            raise InvalidRequestError(f"no queue {request.name!r} to remove")
        if any(q.parent == queue.name for q in state.queues.by_name.values()):
            raise InvalidRequestError(
                f"queue {queue.name!r} has child queues", hint="remove them first"
            )
        if any(lease.queue == queue.name for lease in state.leases.values()):
            raise InvalidRequestError(
                f"queue {queue.name!r} still holds leases", hint="wait for them to end"
            )
        if any(w.queue == queue.name for w in self.pool.waiters.waiters):
            raise InvalidRequestError(f"requests are waiting in queue {queue.name!r}")
        state.store.drop_queue(queue.name)
        state.set_queues(
            queues.Queues(q for q in state.queues.by_name.values() if q.name != queue.name)
        )
        return convert.queue_to_pb(queue)

    async def ListQueues(
        self, request: pb.ListQueuesRequest, context: Context
    ) -> pb.ListQueuesResponse:
        return pb.ListQueuesResponse(
            queues=[
                pb.QueueStatus(
                    queue=convert.queue_to_pb(f.queue),
                    allocated=f.allocated,
                    fair_share=f.fair_share,
                    deserved=f.deserved,
                    leases=f.leases,
                    waiting=f.waiting,
                )
                for f in self.pool.queue_figures()
            ]
        )
