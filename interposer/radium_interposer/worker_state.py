"""The worker's side of the program's random generators (docs/remoting.md, "The program's
state"; docs/data-plane.md, meta key ``ps``).

A call whose metadata has ``ps`` runs with the client's generator states: each kind the client
names is set to the state it sent; when it sent none (unchanged here since the client last had
it), the generator goes on from where this connection's calls left it, streamed calls included.
The worker's generators are shared by all connections of the lease: when another connection's
calls used one meanwhile, its state is put aside for that connection and this one's put back. A
call made by a callback (nested in a running call of the same connection) restores nothing: the
running call's draws are the program's. A call that waits answers ``ps`` (empty when nothing
changed): each state that differs from what the client has.
"""

from __future__ import annotations

import weakref
from typing import Any, Dict, List

from radium_interposer import rng_state, tensor_sync

__all__ = ["begin", "end"]

#: Per connection (session): the state of each kind the client is known to have.
_told: weakref.WeakKeyDictionary[Any, Dict[str, Any]] = weakref.WeakKeyDictionary()
#: Per connection: the state its calls left each kind in, while another connection's calls
#: use the generator.
_aside: weakref.WeakKeyDictionary[Any, Dict[str, Any]] = weakref.WeakKeyDictionary()
#: Per kind: the connection whose calls the generator's present state follows (a weak ref).
_owner: Dict[str, Any] = {}


def begin(session: Any, meta: Dict[str, Any], buffers: List[Any]) -> None:
    """Before a call: the client's generator states, as it asked, and its tensors' changes."""
    if "tw" in meta:
        tensor_sync.apply(meta["tw"], buffers)
    wanted = meta.get("ps")
    if wanted is None:
        return
    if not isinstance(wanted, dict) or not all(k in rng_state.KINDS for k in wanted):
        raise ValueError(f"ps must map generator kinds {rng_state.KINDS} to states")
    told = _told.setdefault(session, {})
    nested = getattr(session, "running", 1) > 1
    for kind, tree in wanted.items():
        if not rng_state.available(kind):
            continue  # this worker has no numpy: the client's code cannot reach its generator
        if tree is not None:
            told[kind] = rng_state.load(kind, tree)
            _take(kind, session, put_back=False)  # another connection's state aside first
            rng_state.put(kind, told[kind])
        elif not nested and kind in told:
            _take(kind, session, put_back=True)


def _take(kind: str, session: Any, put_back: bool) -> None:
    """The generator ``kind`` follows ``session``'s calls from now on: the state another
    connection's calls left is put aside for it, and (``put_back``) this one's put back."""
    owner = _owner.get(kind)
    previous = owner() if owner is not None else None
    if previous is session:
        return  # the common case: one connection's calls, one after the other
    if previous is not None:
        _aside.setdefault(previous, {})[kind] = rng_state.get(kind)
    if put_back:
        mine = _aside.get(session, {}).pop(kind, None)
        rng_state.put(kind, mine if mine is not None else _told[session][kind])
    _owner[kind] = weakref.ref(session)


def end(session: Any, meta: Dict[str, Any], reply: Dict[str, Any], buffers: List[Any]) -> None:
    """After a call (that raised or not): the states and mirrored tensors it changed, into its
    answer (a pipelined call has none: the next answer brings them)."""
    if tensor_sync.tracking() and not meta.get("nr"):
        changed = tensor_sync.changed(buffers)
        if changed:
            reply["tw"] = changed
    wanted, told = meta.get("ps"), _told.get(session)
    if not isinstance(wanted, dict) or told is None or meta.get("nr"):
        return
    states = {}
    for kind in wanted:
        if kind in told:
            current = rng_state.get(kind)
            if current != told[kind]:
                told[kind] = current
                states[kind] = rng_state.dump(kind, current)
    reply["ps"] = states  # even empty: the client then knows it has the worker's states
