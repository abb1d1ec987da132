"""The client's side of callbacks: local callables the worker calls back (docs/data-plane.md,
"Callbacks"; semantics in docs/remoting.md).

``LambdaLR(opt, lambda epoch: 0.95 ** epoch)``: the lambda stays here, in a table under an id,
and the worker gets a callable that calls it through the connection. The worker's calls arrive
while this process waits for an answer; each runs here and is answered before the wait goes on.
"""

from __future__ import annotations

import collections
import itertools
import threading
from typing import Any, Callable, Dict, List, Optional

from radium_interposer import client_objects, codec, file_service, wire
from radium_interposer.client import Connection, forward_output, state
from radium_interposer.naming import error_meta

__all__ = ["drop", "held", "keep", "lookup", "raised", "reference", "serve"]

#: Callables the worker holds, by id (it tells us when it lets go of one).
_table: Dict[int, Callable[..., Any]] = {}
#: Exceptions our callbacks raised, by token, so the same object is raised here if it comes
#: back through the remote call. Bounded: older ones are forgotten.
_raised: collections.OrderedDict[str, BaseException] = collections.OrderedDict()
_RAISED_KEPT = 32
_tokens = itertools.count(1)
_lock = threading.Lock()


def reference(obj: Any) -> Optional[Dict[str, Any]]:
    """A callable as a callback reference (a fresh id each time it crosses); None if not one."""
    if isinstance(obj, type) or not callable(obj):
        return None
    callback_id = state.new_id()
    with _lock:
        _table[callback_id] = obj
    name = getattr(obj, "__qualname__", None) or type(obj).__qualname__
    return {"$": "cb", "id": callback_id, "n": str(name)}


def lookup(callback_id: Any) -> Callable[..., Any]:
    """The callable the worker names by ``callback_id`` (one of ours handed back)."""
    function = _table.get(callback_id) if isinstance(callback_id, int) else None
    if function is None:
        raise LookupError(f"unknown callback {callback_id!r} (released, or another process's)")
    return function


def held() -> bool:
    """Whether the worker holds any of our callables (then calls are not pipelined)."""
    return bool(_table) or client_objects.held()


def drop(ids: Any) -> None:
    """The worker no longer holds these callbacks."""
    with _lock:
        for callback_id in ids if isinstance(ids, list) else []:
            if isinstance(callback_id, int):
                _table.pop(callback_id, None)
    client_objects.drop(ids)  # our files and objects share the ids and their release


def raised(token: Any) -> Optional[BaseException]:
    """Our own exception behind a remote error's token, if we still have it."""
    with _lock:
        return _raised.pop(token, None) if isinstance(token, str) else None


def serve(conn: Connection, frame: wire.Frame) -> None:
    """Run one callback the worker sent and answer it (an ERROR for anything that goes wrong,
    malformed requests included: nothing the worker sends stops this process)."""
    from radium_interposer import proxy

    meta = frame.meta
    forward_output(meta)
    conn.serving.append(frame.call_id)
    buffers: List[Any] = []
    try:
        op = meta.get("op")
        if op == "open":
            result: Any = file_service.open_file(meta)
        elif op == "file":
            result = file_service.use_file(meta, frame.buffers)
        elif op == "fs":
            result = file_service.use_fs(meta)
        elif op == "fo":  # a file object of the program, passed to a remote call
            result = client_objects.use_file(meta, frame.buffers)
        elif op == "callback":
            function = lookup(meta.get("cb"))
            args = proxy.decode(meta.get("a", []), frame.buffers)
            kwargs = proxy.decode(meta.get("k", {"$": "d", "k": [], "v": []}), frame.buffers)
            if not isinstance(args, list) or not isinstance(kwargs, dict):
                raise TypeError("callback arguments must be a list and a mapping")
            result = function(*args, **kwargs)
        else:
            raise ValueError(f"the worker may call back or use a file, not {op!r}")
        refer = proxy.refer_for(conn, buffers)  # the program's own library objects: pickled
        reply, kind = {"v": codec.encode(result, buffers, refer)}, wire.RESULT
    # KeyboardInterrupt too: it goes to the worker, and comes back here as itself.
    except BaseException as exc:
        reply, buffers, kind = error_meta(exc), [], wire.ERROR
        reply["cx"] = _keep(exc)
    finally:
        conn.serving.pop()
    conn.answer(kind, frame.call_id, reply, buffers)


def keep(error: BaseException) -> str:
    """A token for one of our exceptions sent to the worker (exits.node): raised back, it
    comes back as this very object."""
    return _keep(error)


def _keep(error: BaseException) -> str:
    token = f"{id(error):x}.{next(_tokens)}"
    with _lock:
        _raised[token] = error
        while len(_raised) > _RAISED_KEPT:
            _raised.popitem(last=False)
    return token
