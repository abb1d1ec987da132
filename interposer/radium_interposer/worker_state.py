"""The worker's side of the program's random generators (docs/remoting.md, "The program's
state"; docs/data-plane.md, meta key ``ps``).

A call whose metadata has ``ps`` runs with the client's generator states: each kind the client
names is set to the state it sent, or, when it sent none (unchanged since this connection's last
answer), to the state this connection last had, if another connection moved the worker's
(the worker's generators are shared by all connections of the lease). After the call, a state
that changed goes back in the answer's ``ps``. A call made by a callback (nested in a running
call of the same connection) does not restore: the running call's draws are the program's.
"""

from __future__ import annotations

import weakref
from typing import Any, Dict, List

from radium_interposer import rng_state, tensor_sync

__all__ = ["begin", "end"]

#: Per connection (session): the state of each kind the client is known to have.
_known: weakref.WeakKeyDictionary[Any, Dict[str, Any]] = weakref.WeakKeyDictionary()


def begin(session: Any, meta: Dict[str, Any], buffers: List[Any]) -> None:
    """Before a call: the client's generator states, as it asked, and its tensors' changes."""
    if "tw" in meta:
        tensor_sync.apply(meta["tw"], buffers)
    wanted = meta.get("ps")
    if wanted is None:
        return
    if not isinstance(wanted, dict) or not all(k in rng_state.KINDS for k in wanted):
        raise ValueError(f"ps must map generator kinds {rng_state.KINDS} to states")
    known = _known.setdefault(session, {})
    nested = getattr(session, "running", 1) > 1
    for kind, tree in wanted.items():
        if not rng_state.available(kind):
            continue  # this worker has no numpy: the client's code cannot reach its generator
        if tree is not None:
            known[kind] = rng_state.load(kind, tree)
            rng_state.put(kind, known[kind])
        elif kind in known and not nested and rng_state.get(kind) != known[kind]:
            rng_state.put(kind, known[kind])


def end(session: Any, meta: Dict[str, Any], reply: Dict[str, Any], buffers: List[Any]) -> None:
    """After a call (that raised or not): the states and mirrored tensors it changed, into its
    answer (a pipelined call has none: the next answer brings them)."""
    if tensor_sync.tracking() and not meta.get("nr"):
        changed = tensor_sync.changed(buffers)
        if changed:
            reply["tw"] = changed
    wanted, known = meta.get("ps"), _known.get(session)
    if not isinstance(wanted, dict) or known is None or meta.get("nr"):
        return
    states = {}
    for kind in wanted:
        if kind in known:
            current = rng_state.get(kind)
            if current != known[kind]:
                known[kind] = current
                states[kind] = rng_state.dump(kind, current)
    if states:
        reply["ps"] = states
