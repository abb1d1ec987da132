"""The client's side of callbacks: local callables the worker calls back (docs/data-plane.md,
"Callbacks"; semantics in docs/remoting.md).

``LambdaLR(opt, lambda epoch: 0.95 ** epoch)``: the lambda stays here, in a table under an id,
and the worker gets a callable that calls it through the connection. The worker's calls arrive
while this process waits for an answer; :mod:`radium_interposer.client_serving` runs each and
answers it before the wait goes on.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, Optional

from radium_interposer.client import state
from radium_interposer.tags import CALLBACK

__all__ = ["drop", "held", "lookup", "reference"]

#: Callables the worker holds, by id (it tells us when it lets go of one).
_table: Dict[int, Callable[..., Any]] = {}
_lock = threading.Lock()


def reference(obj: Any) -> Optional[Dict[str, Any]]:
    """A callable as a callback reference (a fresh id each time it crosses); None if not one."""
    if isinstance(obj, type) or not callable(obj):
        return None
    callback_id = state.new_id()
    with _lock:
        _table[callback_id] = obj
    name = getattr(obj, "__qualname__", None) or type(obj).__qualname__
    return {"$": CALLBACK, "id": callback_id, "n": str(name)}


def lookup(callback_id: Any) -> Callable[..., Any]:
    """The callable the worker names by ``callback_id`` (one of ours handed back)."""
    function = _table.get(callback_id) if isinstance(callback_id, int) else None
    if function is None:
        raise LookupError(f"unknown callback {callback_id!r} (released, or another process's)")
    return function


def held() -> bool:
    """Whether the worker holds any of our callables (client_objects.held asks for both)."""
    return bool(_table)


def drop(ids: Any) -> None:
    """The worker no longer holds these callbacks."""
    with _lock:
        for callback_id in ids if isinstance(ids, list) else []:
            if isinstance(callback_id, int):
                _table.pop(callback_id, None)
