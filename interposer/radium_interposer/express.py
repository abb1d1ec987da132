"""The express lane of streamed calls: a call of a shape that streamed before costs the client a
few checks and one ``struct`` pack (docs/data-plane.md, "The client's express lane").

The full path (:func:`radium_interposer.calls.invoke`) decides whether a call may stream and
encodes it, walking its arguments three times. Once a call went as a binary record, its
:class:`Plan` is kept on the connection, keyed by the call site, the callable's kind and the
exact types of the arguments: the template's id and layout, where each slot's value comes
from, the constants the template holds, the type the site is predicted to return. A later call
with that key goes as the same record once the plan's checks pass (its constants equal, its
proxies handles, the prediction unchanged, nothing to say or sync first, not in a ``try``);
any other call takes the full path, which would have made the same record.

What a plan needs to hold is what makes the full path's answer the same at every call with the
key: an argument's type says whether it may name a file, whether it is harmless to kept
metadata, and which type name it adds to the typed site. So types the full path sees through
(a plain proxy of a path or method, a class) get no plan.
"""

from __future__ import annotations

import sys
from typing import Any, Dict, Optional, Set, Tuple

from radium_interposer import (
    client_objects,
    cwd,
    express_forms,
    guarded,
    known,
    ops,
    peer,
    program_state,
    records,
    tensor_sync,
)
from radium_interposer import client_warnings as warns
from radium_interposer.client import Connection, state
from radium_interposer.express_forms import CONSTANT, FLOAT, HANDLE, INT, ITSELF, NO_SLOT, OWNER
from radium_interposer.tags import ATTRIBUTE, PATH
from radium_interposer.tags import HANDLE as HANDLE_TAG  # HANDLE: an argument's kind here

__all__ = ["MISS", "Plan", "key", "learn", "quiet", "send", "wait"]

#: What :func:`send` gives for a call it did not send (the full path takes it).
MISS = object()
#: At most this many plans per connection (then no more are made: the full path serves).
MAX_PLANS = 4096
_CONSTANT_TYPES = (type(None), bool, str)


class Plan:
    """How the calls of one key go: the template and where each of its slots comes from."""

    __slots__ = (
        "callable",
        "harmless",
        "layout",
        "name",
        "parts",
        "predicted",
        "tid",
        "typed",
        "values",
        "waits",
    )

    def __init__(
        self,
        template: Tuple[int, Any],
        callable_: int,
        name: Any,
        parts: Tuple[Tuple[int, Any], ...],
        typed: str,
        predicted: Optional[str],
        harmless: bool,
        values: express_forms.Values,
        waits: bool = False,
    ) -> None:
        self.tid, self.layout = template
        #: Reads a call's slot values, checking that it fits (express_forms).
        self.values = values
        self.callable = callable_
        #: The path (NO_SLOT) or the method's name (OWNER) the callable must have.
        self.name = name
        self.parts = parts
        #: The typed call site (calls._typed): predictions and warnings are kept by it.
        self.typed = typed
        #: The remote type of the result, or None: the call returns nothing (void).
        self.predicted = predicted
        #: known.harmless's answer: the call cannot change kept metadata.
        self.harmless = harmless
        #: Its calls wait for their answer, as waiting records (data-plane version 3).
        self.waits = waits


def key(function: Dict[str, Any], args: Tuple[Any, ...], kwargs: Dict[str, Any], site: str) -> Any:
    """The key of a call's plan."""
    if kwargs:
        kinds = (tuple(map(type, args)), tuple(kwargs), tuple(map(type, kwargs.values())))
        return (site, function["$"], kinds)
    return (site, function["$"], tuple(map(type, args)))


def quiet(conn: Connection) -> bool:
    """Whether a call on ``conn`` needs nothing said or synced with it: no mirrored tensor,
    no synced random state, no callable of ours held by the worker, no callback being served,
    the working directory and the client's description as the worker last got them."""
    return not (
        tensor_sync.tracking()
        or program_state.syncing()
        or client_objects.held()
        or conn.serving
        or cwd.current() != conn.cwd
        or not peer.told(conn)
    )


def learn(
    conn: Connection,
    function: Dict[str, Any],
    args: Tuple[Any, ...],
    kwargs: Dict[str, Any],
    site: str,
    typed: str,
    predicted: Optional[str],
    proxy: Any,
    waits: bool = False,
) -> None:
    """After the full path sent this call as a record: its plan, when its shape has one.
    ``proxy`` is the proxy module (it imports calls, which imports this one); ``waits``: the
    record was a waiting one."""
    plans = conn.templates.plans
    if len(plans) >= MAX_PLANS or conn.templates.last is None:
        return
    tag = function["$"]
    callable_, name = NO_SLOT, None
    if tag == PATH:
        name = function["p"]
    elif tag == HANDLE_TAG:
        callable_ = ITSELF
    elif tag == ATTRIBUTE and function["o"]["$"] == HANDLE_TAG:
        callable_, name = OWNER, function["n"]
    else:
        return
    parts = []
    for value in (*args, *kwargs.values()) if kwargs else args:
        part = _part(value, proxy.Remote)
        if part is None:
            return
        parts.append(part)
    harmless = known.harmless(function, site, args, kwargs, proxy.remote_kind)
    template = conn.templates.last
    values = express_forms.form(callable_, name, parts, len(kwargs), *proxy.slot_readers())
    plan = Plan(template, callable_, name, tuple(parts), typed, predicted, harmless, values, waits)
    plans[key(function, args, kwargs, site)] = plan


def _part(value: Any, remote: type) -> Optional[Tuple[int, Any]]:
    kind = type(value)
    if kind is int:
        return (INT, None)
    if kind is float:
        return (FLOAT, None)
    if kind in _CONSTANT_TYPES:
        return (CONSTANT, value)
    # A proxy of a class of its own (its type name known from its class): a handle.
    handle = isinstance(value, remote) and kind is not remote
    if handle and object.__getattribute__(value, "_rd_ref")["$"] == HANDLE_TAG:
        return (HANDLE, None)
    return None


def send(
    conn: Connection,
    plan: Plan,
    function: Dict[str, Any],
    args: Tuple[Any, ...],
    kwargs: Dict[str, Any],
    predictions: Dict[str, str],
) -> Any:
    """Send the call by its plan: the result's proxy (None for a void call), or MISS when a
    check fails. ``predictions``: the typed call sites' predicted result types (calls)."""
    if predictions.get(plan.typed) != plan.predicted or plan.typed in warns.sites:
        return MISS
    values = plan.values(function, args, kwargs, conn)
    if values is None or not quiet(conn):
        return MISS
    where = guarded.program_frame()
    if guarded.in_try(where):
        return MISS  # its error must reach the try's handler (guarded)
    _before(conn, plan)
    r = state.new_id()
    record = plan.layout.pack(records.CALL, plan.tid, r, *values)
    counts = state.counts
    counts["streamed"] += 1
    counts["records"] += 1
    counts["express"] += 1
    conn.stream(record)
    warns.pipelined(r, plan.typed, where)
    if plan.predicted is None:
        return None
    return sys.modules["radium_interposer.proxy"].fresh(r, plan.predicted, conn)


def wait(
    conn: Connection,
    plan: Plan,
    function: Dict[str, Any],
    args: Tuple[Any, ...],
    kwargs: Dict[str, Any],
    predictions: Dict[str, str],
    voids: Set[str],
) -> Any:
    """Send a waiting call by its plan: its answer frame, or MISS when a check fails. A site
    predicted now (``predictions``) or found to return nothing (``voids``) streams: the full
    path decides its calls."""
    if plan.typed in predictions or plan.typed in voids:
        return MISS
    values = plan.values(function, args, kwargs, conn)
    if values is None or not quiet(conn):
        return MISS
    _before(conn, plan)
    record = plan.layout.pack(records.CALL, plan.tid, state.new_id(), *values)
    state.counts["waited"] += 1
    try:
        return conn.request({"op": ops.CALL}, record=record)
    finally:
        warns.learn(plan.typed)  # whether its answer carried a warning of its own


def _before(conn: Connection, plan: Plan) -> None:
    """Before a call goes by its plan: kept metadata it may change forgotten, and the globals
    the program changed sent first."""
    if known.answers and not plan.harmless:
        known.forget()
    program_state.before_call(conn, {})
