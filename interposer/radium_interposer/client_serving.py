"""The worker's requests this client serves while it waits for an answer (docs/data-plane.md,
"Callbacks"): calls of the program's callables (:mod:`radium_interposer.callbacks`), and uses
of its files and file objects (:mod:`radium_interposer.file_service`,
:mod:`radium_interposer.client_objects`). The connection hands each over through
``upcalls.bound.serve``; its arguments decode into proxies, which is why this sits above them.
"""

from __future__ import annotations

from typing import Any, List

from radium_interposer import (
    callbacks,
    client_objects,
    codec,
    errors,
    file_service,
    ops,
    proxy,
    wire,
)
from radium_interposer.client import Connection
from radium_interposer.client_warnings import forward_output
from radium_interposer.naming import error_meta
from radium_interposer.tags import DICT

__all__ = ["serve"]


def serve(conn: Connection, frame: wire.Frame) -> None:
    """Run one callback the worker sent and answer it (an ERROR for anything that goes wrong,
    malformed requests included: nothing the worker sends stops this process)."""
    meta = frame.meta
    forward_output(meta)
    conn.serving.append(frame.call_id)
    buffers: List[Any] = []
    try:
        op = meta.get("op")
        if op == ops.OPEN:
            result: Any = file_service.open_file(meta)
        elif op == ops.FILE:
            result = file_service.use_file(meta, frame.buffers)
        elif op == ops.FS:
            result = file_service.use_fs(meta)
        elif op == ops.FILE_OBJECT:  # a file object of the program, passed to a remote call
            result = client_objects.use_file(meta, frame.buffers)
        elif op == ops.CALLBACK:
            function = callbacks.lookup(meta.get("cb"))
            args = proxy.decode(meta.get("a", []), frame.buffers)
            kwargs = proxy.decode(meta.get("k", {"$": DICT, "k": [], "v": []}), frame.buffers)
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
        reply["cx"] = errors.keep(exc)
    finally:
        conn.serving.pop()
    conn.answer(kind, frame.call_id, reply, buffers)
