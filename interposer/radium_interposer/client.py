"""The interposer's side of the data plane: connections to the lease's worker, and calls.

Each thread has its own connection (so threads run in parallel on the worker); a forked child
makes new ones and keeps its parent's remote objects (same lease, same worker). A connection
comes from the node agent, already authenticated, over the container's private socket: the
container needs no network route and holds no secret. Spec: docs/data-plane.md.
"""

from __future__ import annotations

import atexit
import itertools
import os
import random
import socket
import threading
import weakref
from typing import Any, Dict, List, Optional, Sequence

from radium_interposer import (
    client_points,
    known,
    ops,
    peer,
    records,
    spin,
    structs,
    templates,
    upcalls,
    wire,
)
from radium_interposer.client_answers import apply as _apply_answer
from radium_interposer.dialing import dial
from radium_interposer.errors import RemoteError as RemoteError  # programs have found it here
from radium_interposer.errors import WorkerGone

__all__ = [
    "LIMITS",
    "OUTBOX_CHUNKS",
    "PENDING_BYTES",
    "Connection",
    "State",
    "state",
]

LIMITS = wire.Limits(max_meta=16 << 20)
#: Calls sent without waiting (records of streamed calls, frames of pipelined ones) wait here
#: until a call needs an answer or this much is waiting (~100 records): small enough that the
#: worker starts on them while the program goes on making more. One bound for both: a program
#: that mixes them (a ``with`` per step) once waited for 256 frames, and the worker had a
#: hundred steps to run at each value the program read.
PENDING_BYTES = 4096
#: ... or this many chunks (frames of pipelined calls, each a few).
OUTBOX_CHUNKS = 256
_LOST = "; it crashed or the lease ended, and its remote objects are lost"


class Connection:
    """One socket to the worker; calls on it are strictly ordered (the worker serves in order)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        # Buffered: a frame's header, sizes and metadata arrive with one recv, not three.
        self.reader: Any = spin.reader(sock)
        #: Encoded frames of pipelined calls, sent together (one syscall for many calls).
        self.outbox: List[Any] = []
        self.outbox_bytes = 0
        self.pid = os.getpid()
        # Reentrant: a callback the worker makes while we wait may call the worker itself.
        self.lock = threading.RLock()
        self.call_id = 0
        #: Call ids of the worker's callbacks running here, innermost last.
        self.serving: List[int] = []
        #: The program context (argv, environment) the worker last got on this connection.
        self.context: Optional[Dict[str, Any]] = None
        #: This process's working directory, as the worker last got it on this connection.
        self.cwd: Optional[str] = None
        #: Records of streamed calls not yet sent (a binary batch: docs/data-plane.md).
        self.batch = bytearray()
        self.templates = templates.Templates()
        #: Calls sent without waiting (pipelined) since the last reply.
        self.unsynced = 0
        self.broken: Optional[str] = None

    def request(
        self,
        meta: Dict[str, Any],
        buffers: Sequence[Any] = (),
        wait: bool = True,
        record: Optional[bytes] = None,
    ) -> Optional[wire.Frame]:
        """Send a request; its answer when it waits. ``record``: a waiting call as the batch's
        last record (data-plane version 3; ``meta`` is then ``{"op": ops.CALL}``), made while
        nothing else was to be said (express.quiet): releases go after it in the batch."""
        op = meta.get("op")
        if op != ops.CALL and op not in ops.READS:
            known.forget()  # it may run the program's code (import, define, ship)
        with self.lock:
            if self.broken:
                raise WorkerGone(self.broken)
            try:
                releases = state.take_releases(self) if state.releases and not record else None
                if releases:  # freed after this call ran (it may still use them)
                    meta["rel"] = releases
                if self.serving:  # made by a callback: the worker runs it before answering that
                    meta["in"] = self.serving[-1]
                peer.describe(self, meta)  # has it numpy, its settings: said once per connection
                self.call_id += 1
                if record is None:
                    self._queue(wire.encode(wire.CALL, self.call_id, meta, buffers))
                else:
                    self.batch += record
                    self._close_batch(self.call_id)
                if not wait:
                    self.unsynced += 1
                    if len(self.outbox) < OUTBOX_CHUNKS and self.outbox_bytes < PENDING_BYTES:
                        return None
                self._flush()
                if not wait:
                    return None
                state.counts["round_trips"] += 1
                frame = self._answer()
            except (OSError, wire.ProtocolError) as exc:
                frame, reason = None, str(exc)
            except BaseException as exc:  # Ctrl-C, or what a signal handler raised
                # The answer may still come, or be half read: this connection is out of step
                # (the next call would read this one's answer). The next call makes another;
                # the worker's objects belong to the lease, not to a connection.
                self.broken = "radium: a call on this connection was interrupted"
                self.sock.close()
                # Where the program's call went remote, not our socket reads below.
                raise exc.with_traceback(None)  # noqa: B904 - interrupted while the call ran remotely
            else:
                reason = "the worker closed the connection"
            if frame is None:
                raise self._gone(reason)
            # After a quiet barrier a streamed call's error may still be owed: the next
            # print, fork or exit asks again.
            self.unsynced = 1 if meta.get("q") else 0
        _apply_answer(self, frame)
        return frame

    def _gone(self, reason: str, lost: bool = True) -> WorkerGone:
        """This connection is broken for good: the error to raise, and every later call's."""
        self.broken = f"radium: the lease's worker is gone ({reason})" + (_LOST if lost else "")
        self.sock.close()
        return WorkerGone(self.broken)

    def stream(self, record: bytes) -> None:
        """Queue a streamed call's record; it goes with the next request, or when the batch is
        full."""
        with self.lock:
            if self.broken:
                raise WorkerGone(self.broken)
            self.batch += record
            self.unsynced += 1
            if len(self.batch) + self.outbox_bytes >= PENDING_BYTES:
                try:
                    self._flush()
                except OSError as exc:
                    raise self._gone(str(exc), lost=False) from None

    def _close_batch(self, call_id: int = 0) -> None:
        """The batch so far as one frame in the outbox, with the releases it allows; a call id
        when its last call waits for the answer."""
        releases = state.take_releases(self) if state.releases else None
        if releases:  # after the records that may still use them
            self.batch += records.release(releases)
        self.outbox.extend(wire.encode_batch(call_id, self.batch))
        self.outbox_bytes += len(self.batch)
        self.batch = bytearray()

    def _answer(self) -> Optional[wire.Frame]:
        """The next answer; the worker's callbacks that come first are run and answered."""
        while True:
            frame = wire.read(self.reader.readinto, LIMITS)
            if frame is None or (frame.type != wire.CALL and "cbrel" not in frame.meta):
                return frame  # the common case: no callback involved
            if frame.type != wire.CALL:
                upcalls.bound.released(frame.meta["cbrel"])
                return frame
            upcalls.bound.serve(self, frame)

    def answer(self, kind: int, call_id: int, meta: Dict[str, Any], buffers: List[Any]) -> None:
        """Answer a callback, after the pipelined calls it made (they ran before it returned)."""
        self._queue(wire.encode(kind, call_id, meta, buffers))
        self._flush()

    def _queue(self, chunks: List[Any]) -> None:
        if self.batch:  # the streamed calls made before this request run first
            self._close_batch()
        self.outbox.extend(chunks)
        self.outbox_bytes += sum(memoryview(c).nbytes for c in chunks)

    def _flush(self) -> None:
        if self.batch:
            self._close_batch()
        if self.outbox:
            outbox, self.outbox, self.outbox_bytes = self.outbox, [], 0
            wire.send_chunks(self.sock, outbox)

    def sync(self, quiet: bool = False) -> None:
        """Wait until every pipelined call sent so far has run on the worker. ``quiet``: a
        streamed call's error is not raised here but left to this connection's next request
        (a barrier from another thread, or at a fork, is not where the program made it)."""
        if self.unsynced:
            self.request({"op": ops.PING, "q": 1} if quiet else {"op": ops.PING})


class State:
    """Per-process data-plane state: connections, handle ids, proxies to release."""

    def __init__(self) -> None:
        self.local = threading.local()
        self.connections: weakref.WeakSet[Connection] = weakref.WeakSet()
        #: Handle ids of live proxies, with how many proxies hold each (a plain dict: a weak
        #: dictionary's entry costs a microsecond on every pipelined call).
        self.live: Dict[int, int] = {}
        #: (origin connection or None, handle id) of proxies that died; sent with the next call.
        self.releases: List[Any] = []
        self.retain_on_connect = False
        #: What this process asked of the worker: ``calls`` (remoted calls), ``streamed`` (of
        #: them, sent without waiting), ``records`` (of those, as binary records: the rest went
        #: as JSON), ``express`` (of the records, sent by their plan: express.py),
        #: ``waited`` (calls that waited, sent as a binary record), ``round_trips`` (requests
        #: that waited for an answer).
        self.counts: Dict[str, int] = dict.fromkeys(
            ("calls", "streamed", "records", "express", "waited", "round_trips"), 0
        )
        self._new_id_base()

    def _new_id_base(self) -> None:
        # Positive ids, unique across the processes sharing the worker; the worker's are < 0.
        self.id_base = random.SystemRandom().randrange(1, 1 << 30) << 32
        self.ids = itertools.count(1)

    def new_id(self) -> int:
        return self.id_base + next(self.ids)

    def connection(self) -> Connection:
        conn: Optional[Connection] = getattr(self.local, "conn", None)
        # No getpid() here (a syscall a call): a forked child starts with no connection
        # (after_fork_in_child replaces self.local).
        if conn is None or conn.broken:
            structs.preload()  # before the worker says anything (it may plant files)
            conn = Connection(dial())
            self.local.conn = conn
            self.connections.add(conn)
            if self.retain_on_connect:
                # A forked child: its inherited proxies now refer to the objects too.
                self.retain_on_connect = False
                conn.request({"op": ops.RETAIN, "ids": list(self.live)})
        return conn

    def take_releases(self, conn: Connection) -> List[int]:
        """Ids to release now; those made by another connection's unsynced calls wait."""
        ready, later = [], []
        while self.releases:
            origin, handle = self.releases.pop()
            if origin is not None and origin is not conn and origin.unsynced:
                later.append((origin, handle))
            else:
                ready.append(handle)
        self.releases.extend(later)
        return ready

    def after_fork_in_child(self) -> None:
        for conn in list(self.connections):
            conn.sock.close()  # the child's copy only: the parent keeps its connection
        self.connections = weakref.WeakSet()
        self.local = threading.local()
        self.releases = []
        self.counts = dict.fromkeys(self.counts, 0)
        known.forget()  # the parent may change what both now share on the worker
        self.retain_on_connect = bool(self.live)
        self._new_id_base()


state = State()


atexit.register(lambda: client_points.sync_at_exit(state))
if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=lambda: client_points.sync_before_fork(state),
        after_in_child=lambda: state.after_fork_in_child(),
    )
