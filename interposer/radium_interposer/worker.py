"""A lease's worker: runs one tenant's remoted calls and keeps the objects they leave remote.

Started by the acceptor (one process per lease, never shared), it receives authenticated
connections as descriptors on its control socket and serves each in its own thread. Objects
that stay remote live in one handle table for the whole worker, so a client's threads, forked
children and subprocesses (all holding the same lease) share them. Stdlib only (numpy when
present), so the same code runs on an acceptor host or inside the tenant's image. The
operations that give it the client's code are :mod:`radium_interposer.worker_definitions`.
Spec: docs/data-plane.md.
"""

from __future__ import annotations

import importlib
import logging
import socket
import sys
import threading
import time
import types
from typing import Any, Callable, Dict, List, Optional

from radium_interposer import (
    client_files,
    codec,
    nested,
    ops,
    peer,
    poison,
    scalars,
    tags,
    wire,
    worker_main,
    worker_objects,
    worker_state,
)
from radium_interposer.errors import LeasePreempted
from radium_interposer.handles import Failure, HandleTable
from radium_interposer.naming import error_meta, method_names, resolve_path
from radium_interposer.session import ClientCallable, Session, Sessions
from radium_interposer.worker_batch import Batches
from radium_interposer.worker_context import apply_context
from radium_interposer.worker_definitions import Definitions, Reply
from radium_interposer.worker_stats import Stats

__all__ = ["LIMITS", "NOTICED_OPS", "Worker", "main"]

log = logging.getLogger("radium.worker")
LIMITS = wire.Limits(max_meta=16 << 20)
#: Operations a preemption notice is raised at.
NOTICED_OPS = (ops.CALL, ops.FETCH, ops.METHODS, ops.ITEMS)
_CALL = {"op": ops.CALL}  # what a batch's templated call is, to the preemption notice


class Worker(Definitions):
    """One lease's calls, each operation ``op`` of a frame run by its entry in
    :attr:`operations`."""

    def __init__(self) -> None:
        super().__init__()
        self.table = HandleTable()
        self.local = threading.local()
        self.stats = Stats()
        self.sessions = Sessions(self.local, self.outgoing, self.decode)
        #: The acceptor's preemption notice, once it has sent one.
        self.notice: Optional[str] = None
        self.batches = Batches(
            self.table,
            self.decode,
            self.refer,
            lambda s: self._tell_notice(s, _CALL),
            self.result,
            self.stats,
        )
        #: What runs each operation a client may ask for (docs/data-plane.md, "Operations").
        self.operations: Dict[str, Callable[[Dict[str, Any], List[Any]], Reply]] = {
            ops.CALL: self.op_call,
            ops.FETCH: self.op_fetch,
            ops.ITEMS: self.op_items,
            ops.METHODS: self.op_methods,
            ops.RETAIN: self.op_retain,
            ops.STATS: self.op_stats,
            ops.PING: self.op_ping,
            ops.IMPORT: self.op_import,
            ops.ENSURE: self.op_ensure,
            ops.FIND: self.op_find,
            ops.DEFINE: self.op_define,
            ops.SHIP: self.op_ship,
        }

    # -- values ----------------------------------------------------------------------------
    def resolve(self, node: Dict[str, Any]) -> Any:
        tag = node["$"]
        if tag == tags.HANDLE:
            return self.table.get(node.get("id"))
        if tag == tags.PATH:
            return resolve_path(str(node["p"]))
        if tag == tags.ATTRIBUTE:
            return getattr(self.decode(node["o"], []), str(node["n"]))
        if tag == tags.CLASS:
            return resolve_path(str(node["p"]))
        if tag == tags.CALLBACK:
            callback_id, session = node.get("id"), getattr(self.local, "session", None)
            if not isinstance(callback_id, int) or session is None:
                raise ValueError("a client callable needs an integer id, in a call")
            return ClientCallable(self.sessions, session, callback_id, str(node.get("n", "?")))
        if tag == tags.SCALAR_VALUE:  # a numpy scalar the client holds by value (scalars.by_value)
            return scalars.load(node)
        if tag == tags.CLIENT_OBJECT:  # the client program's file or numpy-protocol object
            return worker_objects.resolve(node, self.resolve, getattr(self.local, "session", None))
        return importlib.import_module(str(node["n"]))

    def decode(self, tree: Any, buffers: List[Any]) -> Any:
        # The worker may import what its client names: the client is the tenant, and its
        # values name the modules its own code uses (the client never imports on our word).
        return codec.decode(tree, buffers, self.resolve, codec.importing)

    def refer(self, obj: Any, handle: Optional[int] = None) -> Dict[str, Any]:
        if isinstance(obj, types.ModuleType):
            return {"$": tags.MODULE, "n": obj.__name__}
        if isinstance(obj, ClientCallable):  # back to the client as its own callable
            return obj.reference()
        back = worker_objects.back_reference(obj)
        if back is not None:
            return back
        if handle is None:
            handle = self.table.put_new(obj)
        else:
            self.table.put(handle, obj)
        return {"$": tags.HANDLE, "id": handle, "t": nested.type_name(type(obj))}

    def result(self, obj: Any, handle: Optional[int]) -> Reply:
        """A call's result: by value when small and plain, else left remote as a handle."""
        buffers: List[Any] = []
        return {"v": self.node(obj, handle, buffers)}, buffers

    def node(self, obj: Any, handle: Optional[int], buffers: List[Any]) -> Any:
        if codec.is_plain(obj):
            return codec.encode(obj, buffers, lambda _: None)
        # A numpy scalar to a client without numpy: by value with its text, no handle.
        return scalars.by_value(obj) or self.refer(obj, handle)

    def outgoing(self, obj: Any, buffers: List[Any]) -> Any:
        """A callback's argument (worker_objects.outgoing)."""
        return worker_objects.outgoing(obj, buffers, self.refer)

    # -- operations ------------------------------------------------------------------------
    def op_call(self, meta: Dict[str, Any], buffers: List[Any]) -> Reply:
        if "cwd" in meta:
            client_files.set_client_cwd(meta["cwd"])
        if "ctx" in meta:
            apply_context(meta["ctx"])
        function = self.decode(meta["f"], buffers)
        args = self.decode(meta.get("a", []), buffers)
        kwargs = self.decode(meta.get("k", {"$": tags.DICT, "k": [], "v": []}), buffers)
        try:  # ndarray.tofile into a client file; its writes sent before the call returns
            result = worker_objects.adapt(function, args)(*args, **kwargs)
        finally:
            worker_objects.settle()
        handle = meta.get("r")
        if meta.get("nv"):  # streamed, and it returns nothing: nothing to keep
            return {}, []
        if meta.get("nr") or meta.get("keep"):
            return {"v": self.refer(result, handle)}, []
        with_items = meta.get("ni") is True  # a next() unpacked, an iter() looped: items too
        walked = None
        if with_items:
            result, walked = worker_objects.drain(result)
        reply, out = self.result(result, handle)
        if with_items and isinstance(reply["v"], dict) and reply["v"].get("$") == tags.HANDLE:
            listed = result if walked is None else walked
            items = worker_objects.items(listed, lambda item: self.node(item, None, out))
            if items is not None:
                reply["vi"] = items
        return reply, out

    def op_fetch(self, meta: Dict[str, Any], buffers: List[Any]) -> Reply:
        """The object as a local value; arrays and array-likes as raw buffers."""
        obj = self.decode(meta["o"], buffers)
        np = sys.modules.get("numpy")
        if np is not None and not codec.is_array(obj) and hasattr(obj, "__array__"):
            obj = np.asarray(obj)
        out: List[Any] = []
        return {"v": codec.encode(obj, out, self.refer)}, out

    def op_items(self, meta: Dict[str, Any], buffers: List[Any]) -> Reply:
        out: List[Any] = []
        obj = self.decode(meta["o"], buffers)
        return {"v": worker_objects.items(obj, lambda item: self.node(item, None, out))}, out

    def op_methods(self, meta: Dict[str, Any], buffers: List[Any]) -> Reply:
        obj = self.decode(meta["o"], buffers)
        # c: a class's own callables (``Net.apply``), not those of its metaclass
        kind = obj if meta.get("c") is True and isinstance(obj, type) else type(obj)
        return {"methods": method_names(kind)}, []

    def op_retain(self, meta: Dict[str, Any], buffers: List[Any]) -> Reply:
        self.table.retain(list(meta.get("ids", [])))
        return {}, []

    def op_stats(self, meta: Dict[str, Any], buffers: List[Any]) -> Reply:
        return {"stats": dict(self.stats.snapshot(), handles=len(self.table.objects))}, []

    def op_ping(self, meta: Dict[str, Any], buffers: List[Any]) -> Reply:
        return {}, []

    # -- preemption ------------------------------------------------------------------------
    def preempt(self, text: str) -> None:
        """The pool preempted the lease: each connection's next call is told, once."""
        self.notice = text
        self.batches.preempted = True
        log.warning("%s", text)

    def _tell_notice(self, session: Session, meta: Dict[str, Any]) -> None:
        # Only the program's own calls: the interposer's bookkeeping must not fail, and calls
        # after the notice run until the grace period ends (time to save work).
        if self.notice is None or session.noticed or meta.get("op") not in NOTICED_OPS:
            return
        session.noticed = True
        raise LeasePreempted(self.notice)

    # -- connections -----------------------------------------------------------------------
    def serve(self, sock: socket.socket) -> None:
        """One client connection until it ends; nothing it sends can stop the worker."""
        session = Session(sock, self.handle, self.table.release, self.run_batch)
        self.local.session = session
        self.local.stdout, self.local.stderr = session.out, session.err
        self.local.warned = session.warned  # worker_warnings: this connection's calls' warnings
        try:
            session.serve()
        except (wire.ProtocolError, OSError) as exc:
            log.warning("connection dropped: %s", exc)
        finally:
            self.local.session = self.local.stdout = self.local.stderr = None
            self.local.warned = None
            session.closed = True
            sock.close()
            log.info("connection closed after %d calls", session.calls)

    def handle(self, session: Session, frame: wire.Frame) -> None:
        meta = frame.meta
        started = time.perf_counter()
        operation = self.operations.get(str(meta.get("op")))
        failed = False
        poisoned = poison.answer_instead(session, meta) if session.poison else None
        if poisoned is not None:
            poison.answer(session, frame, poisoned, self.table)
            return
        try:
            if operation is None:
                raise ValueError(f"unknown operation {meta.get('op')!r}")
            peer.receive(meta)  # what the client says of itself (cl): numpy, its settings
            self._tell_notice(session, meta)
            worker_state.begin(session, meta, frame.buffers)  # the program's state (ps, tw)
            reply, buffers = operation(meta, frame.buffers)
            kind = wire.RESULT
        # SystemExit and KeyboardInterrupt too: the tenant's code ends its call, not the worker.
        except BaseException as exc:
            failed = True
            if meta.get("nr"):
                if isinstance(meta.get("r"), int):
                    if not meta.get("nv"):
                        self.table.put(meta["r"], Failure(exc))
                    poison.fail(session, meta["r"], exc)
                reply, buffers = {}, []
            else:
                reply, buffers, kind = error_meta(exc), [], wire.ERROR
        finally:
            received = sum(len(b) for b in frame.buffers)
            frame.buffers = []
        sent = 0
        worker_state.end(session, meta, reply, buffers)
        if not meta.get("nr"):  # a pipelined call's output waits for the next answer
            session.answer(kind, frame.call_id, reply, buffers)
            sent = sum(memoryview(b).nbytes for b in buffers)
        self.stats.request(received, sent, time.perf_counter() - started, failed)

    def run_batch(self, session: Session, batch: List[Any], call_id: int = 0) -> int:
        """A binary batch's records (worker_batch), counted as calls; with a call id, its last
        call is answered as that call (waiting records, docs/data-plane.md)."""
        started = time.perf_counter()
        calls = self.batches.run(session, batch, call_id)
        self.stats.batch(calls, time.perf_counter() - started)
        return calls


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m radium_interposer.worker``: start-up in worker_main."""
    return worker_main.run(Worker(), argv)


if __name__ == "__main__":
    sys.exit(main())
