"""One client connection on the worker: its frames in order, its output, and the calls the
worker makes back to the client (callbacks). Spec: docs/data-plane.md, "Callbacks".

A session reads frames in one thread and hands CALLs to the worker. A callback sends a CALL to
the client and waits for its answer; meanwhile it runs the calls the callback itself makes
(marked ``in``) and defers any other, so the connection's calls keep their order.
"""

from __future__ import annotations

import builtins
import collections
import itertools
import socket
import threading
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

from radium_interposer import client_streams, codec, ops, records, spin, wire
from radium_interposer.tags import CALLBACK

__all__ = [
    "CALLBACK_BIT",
    "LIMITS",
    "BatchRunner",
    "ClientCallable",
    "ClientError",
    "Handler",
    "Release",
    "Session",
    "Sessions",
    "client_error",
]

LIMITS = wire.Limits(max_meta=16 << 20)
#: The top bit marks call ids chosen by the worker (callbacks), apart from the client's.
CALLBACK_BIT = 1 << 63
Handler = Callable[["Session", wire.Frame], None]
Release = Callable[[List[Any]], None]
#: Runs a binary batch's records (worker_batch.Batches.run), its last call answered as call id
#: when that is not 0; the number of calls it held.
BatchRunner = Callable[["Session", List[records.Record], int], int]


class ClientError(RuntimeError):
    """A callback raised on the client an exception of a type the worker does not have."""


class Session:
    """One connection from a client process (a thread of it), served by one worker thread."""

    def __init__(
        self,
        sock: socket.socket,
        handle: Handler,
        release: Release,
        batch: Optional[BatchRunner] = None,
    ) -> None:
        self.sock = sock
        self.handle, self.release, self.batch = handle, release, batch
        #: This connection's templates: their layouts (to read calls) and compiled forms.
        self.records = records.Reader()
        self.templates: Dict[int, Any] = {}
        # Spinning: the client's next request often follows its answer within microseconds.
        self.reader: Any = spin.reader(sock)
        self.out: List[str] = []
        self.err: List[str] = []
        #: Warnings the calls raised (worker_warnings), sent with the output as ``w``.
        self.warned: List[Dict[str, Any]] = []
        #: Frames that arrived while a callback waited, not sent by that callback: run later.
        self.deferred: Deque[wire.Frame] = collections.deque()
        #: Calls in progress (callbacks may use the connection only then).
        self.running = 0
        #: Callback ids the worker no longer holds; told to the client on the next answer.
        self.dropped: List[int] = []
        #: The client process's id prefix (its handle and callback ids share it).
        self.prefix: Optional[int] = None
        self.lock = threading.RLock()
        self.ids = itertools.count(1)
        self.closed = False
        self.calls = 0
        #: The lease's preemption notice was raised at one of this connection's calls.
        self.noticed = False
        #: The last pipelined calls that raised (result id, error): a remote ``__exit__`` after
        #: them sees the first of its body's as the body's exception (exits.clean_exit).
        self.failed: Deque[Tuple[Any, BaseException]] = collections.deque(maxlen=64)
        #: The first error of a streamed call that returns nothing, until it is answered: the
        #: failed call's id and the error (worker: poison).
        self.poison: Optional[Tuple[int, BaseException]] = None

    def serve(self) -> None:
        """Run the client's calls until it closes the connection (or breaks the protocol)."""
        while not self.closed:
            with self.lock:  # a callback from another thread reads only while a call runs
                frame = self.deferred.popleft() if self.deferred else self._read()
            if frame is None or frame.type == wire.BYE:
                return
            self.dispatch(frame)

    def _read(self) -> Optional[wire.Frame]:
        try:
            return wire.read(self.reader.readinto, LIMITS, batches=self.batch is not None)
        except (wire.ProtocolError, OSError):
            self.closed = True  # the stream is out of step: nothing more can be read from it
            raise

    def dispatch(self, frame: wire.Frame) -> None:
        if frame.body is not None:
            self._run_batch(frame.body, frame.call_id)
            return
        if frame.type == wire.RELEASE:
            self.release(_ids(frame.meta.get("ids")))
            return
        if frame.type != wire.CALL:
            raise wire.ProtocolError(f"unexpected frame type {frame.type}")
        if self.prefix is None and isinstance(frame.meta.get("r"), int):
            self.prefix = frame.meta["r"] >> 32
        self.calls += 1
        self.running += 1
        warned = len(self.warned)
        try:
            self.handle(self, frame)
        finally:
            self.running -= 1
        if frame.meta.get("nr"):  # a pipelined call's warnings come later: say whose they are
            for item in self.warned[warned:]:
                item.setdefault("r", frame.meta.get("r"))
        if "rel" in frame.meta:  # freed after the call ran (it may have used them)
            self.release(_ids(frame.meta["rel"]))

    def _run_batch(self, body: bytes, call_id: int) -> None:
        """The batch's records; with a call id, its last call waits for the answer."""
        try:
            batch = self.records.parse(body)
            if call_id and not any(record[0] == "C" for record in batch):
                raise records.RecordError(f"call {call_id} waits on a batch without a call")
        except records.RecordError as exc:
            self.closed = True  # out of step: no later record can be read right
            raise wire.ProtocolError(f"a binary batch is malformed: {exc}") from None
        assert self.batch is not None  # wire.read allows batches only with a runner
        self.running += 1
        try:
            self.calls += self.batch(self, batch, call_id)
        finally:
            self.running -= 1

    def answer(self, kind: int, call_id: int, reply: Dict[str, Any], buffers: List[Any]) -> None:
        """Send an answer with the output printed so far and the callbacks let go of."""
        if self.closed:
            return
        self._attach(reply)
        if self.dropped:
            reply["cbrel"], self.dropped = self.dropped, []
        with self.lock:
            wire.send(self.sock, kind, call_id, reply, buffers)

    def _attach(self, meta: Dict[str, Any]) -> None:
        if self.out:
            meta["out"] = "".join(self.out)
            self.out.clear()
        if self.err:
            meta["err"] = "".join(self.err)
            self.err.clear()
        if self.warned:
            meta["w"] = list(self.warned)
            self.warned.clear()

    def ask(self, meta: Dict[str, Any], buffers: List[Any]) -> wire.Frame:
        """A call to the client: its RESULT frame; its ERROR raised as the client's exception."""
        frame = self.call_client(meta, buffers)
        if frame.type == wire.ERROR:
            raise client_error(frame.meta)
        return frame

    def call_client(self, meta: Dict[str, Any], buffers: List[Any]) -> wire.Frame:
        """Send a callback CALL and wait for its answer, running the calls it makes meanwhile."""
        with self.lock:
            if self.closed or not self.running:
                raise RuntimeError(
                    "the client (a callable or a file of it) was called back when no call of its "
                    "connection runs (from a thread that outlived the call that passed it)"
                )
            call_id = CALLBACK_BIT | next(self.ids)
            self._attach(meta)
            wire.send(self.sock, wire.CALL, call_id, meta, buffers)
            while True:
                frame = self._read()
                if frame is None:
                    self.closed = True
                    raise ConnectionError("the client closed the connection during a callback")
                if frame.type in (wire.RESULT, wire.ERROR):
                    if frame.call_id != call_id:
                        self.closed = True
                        raise wire.ProtocolError("an answer to a callback that was not awaited")
                    return frame
                if frame.type == wire.CALL and frame.meta.get("in") == call_id:
                    self.dispatch(frame)
                elif frame.type in (wire.CALL, wire.RELEASE):
                    self.deferred.append(frame)
                else:
                    self.closed = True
                    raise wire.ProtocolError(f"unexpected frame type {frame.type}")


def _ids(value: Any) -> List[Any]:
    return value if isinstance(value, list) else []


class ClientCallable:
    """A callable of the client, on the worker: calling it runs it there (a callback)."""

    def __init__(self, sessions: Sessions, arrived: Session, callback_id: int, name: str) -> None:
        self._sessions, self._arrived = sessions, arrived
        self._id, self.__name__ = callback_id, name
        self.__qualname__ = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        client_streams.settle()  # the program's files as the local run has them, for the callback
        session = self._sessions.current()
        if session is None or session.prefix != self._id >> 32:
            session = self._arrived
        buffers: List[Any] = []
        meta = {
            "op": ops.CALLBACK,
            "cb": self._id,
            "a": [self._sessions.outgoing(arg, buffers) for arg in args],
            "k": self._sessions.outgoing(kwargs, buffers),
        }
        frame = session.ask(meta, buffers)
        return self._sessions.incoming(frame.meta.get("v"), frame.buffers)

    def reference(self) -> Dict[str, Any]:
        return {"$": CALLBACK, "id": self._id, "n": self.__name__}

    def __repr__(self) -> str:
        return f"<client callable {self.__name__}>"

    def __del__(self) -> None:
        self._arrived.dropped.append(self._id)


def client_error(meta: Dict[str, Any]) -> BaseException:
    """The exception a callback raised: a builtin type as itself, else a ClientError; either
    carries the client's token so the client raises its own object if it comes back."""
    name = str(meta.get("type", ""))
    builtin = getattr(builtins, name, None) if meta.get("module") == "builtins" else None
    args = codec.decode(meta.get("args"), [], lambda _: None)
    error: BaseException
    if isinstance(builtin, type) and issubclass(builtin, BaseException):
        try:
            error = builtin(*(args or []))
        except Exception:
            error = ClientError(str(meta.get("error", name)))
    else:
        error = ClientError(str(meta.get("error", name)))
    error.radium_client_token = meta.get("cx")  # type: ignore[attr-defined]
    return error


class Sessions:
    """The worker's view of sessions for callbacks: which one this thread serves, and how
    callback arguments and results cross (the worker supplies both)."""

    def __init__(
        self,
        local: threading.local,
        outgoing: Callable[[Any, List[Any]], Any],
        incoming: Callable[[Any, List[Any]], Any],
    ) -> None:
        self.local = local
        self.outgoing = outgoing
        self.incoming = incoming

    def current(self) -> Optional[Session]:
        session: Optional[Session] = getattr(self.local, "session", None)
        return session if session is not None and session.running else None

    def call_current(
        self, meta: Dict[str, Any], buffers: List[Any]
    ) -> Tuple[Dict[str, Any], List[Any]]:
        """A call to the client whose call runs in this thread: its answer, or its error."""
        session = self.current()
        if session is None:
            raise PermissionError("the client can be reached only during a call from it")
        frame = session.ask(meta, buffers)
        return frame.meta, frame.buffers
