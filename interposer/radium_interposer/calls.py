"""The one function that calls the worker, :func:`invoke`, and when it streams a call.

Once a call site (a function, or a method of a type) has returned a remote object, its later
calls are *streamed*: sent without waiting, the proxy for the result made at once, so chains
of array operations cost one round trip at the end rather than one per call. So are the calls
of operations that return nothing (``backward``, ``step``, assignments) once their site
returned None. A streamed call of the common shape goes as a binary record
(:mod:`radium_interposer.templates`), any other as a JSON frame. Proxies
(:mod:`radium_interposer.proxy`, which re-exports ``invoke``) call through here.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Dict, List, Optional, Set, Tuple

from radium_interposer import (
    client_objects,
    codec,
    cwd,
    express,
    file_args,
    guarded,
    iteration,
    known,
    nested,
    ops,
    program_state,
    tensor_sync,
)
from radium_interposer import client_warnings as warns
from radium_interposer.client import Connection, state
from radium_interposer.tags import ATTRIBUTE, PATH

__all__ = ["BINARY", "EXPRESS", "STREAM", "VOID", "VOID_METHODS", "VOID_PATHS", "WAITS", "invoke"]

#: ``RADIUM_STREAM=0``: every call waits for its answer (the per-call RPC baseline the
#: benchmarks compare streaming with).
STREAM = os.environ.get("RADIUM_STREAM", "1") != "0"
#: ``RADIUM_BINARY=0``: streamed calls go as JSON frames, not as binary records (to compare).
BINARY = os.environ.get("RADIUM_BINARY", "1") != "0"
#: ``RADIUM_EXPRESS=0``: every streamed call takes the full path, none its plan (to compare).
EXPRESS = os.environ.get("RADIUM_EXPRESS", "1") != "0"
_LANE = STREAM and BINARY and EXPRESS
#: The proxy module's name: it imports this one, so it is looked up when a call needs it.
_PROXY = "radium_interposer.proxy"
#: ``RADIUM_BINARY_WAITS=0``: calls that wait go as JSON frames, not waiting records (to compare).
WAITS = BINARY and os.environ.get("RADIUM_BINARY_WAITS", "1") != "0"
#: Call sites that returned a remote object, with its type: their calls are pipelined.
_returns_remote: Dict[str, str] = {}
#: Call sites of operations that return nothing (VOID_*) whose call returned None: their calls
#: stream too, and an error of one is raised at the program's next sync point
#: (docs/remoting.md, "Calls are streamed").
_returns_none: Set[str] = set()
#: What always returns None: what may be streamed without a result. Only these: a site that
#: returned None once may return a value another time (``next(it, None)``, ``dict.get``).
VOID_PATHS = frozenset(
    ("builtins.setattr", "builtins.delattr", "operator.setitem", "operator.delitem")
)
VOID_METHODS = frozenset(("backward", "zero_grad", "step", "fill", "fill_diagonal", "seed"))


def invoke(
    function: Dict[str, Any],
    args: Tuple[Any, ...],
    kwargs: Dict[str, Any],
    site: str,
    pipeline: bool = True,
    context: Optional[Dict[str, Any]] = None,
    discard: bool = False,
    items: bool = False,
) -> Any:
    """Call ``function`` (a reference tree) on the worker with these arguments (and, for the
    user's own functions, the program's ``context``: argv and allowed environment).
    ``discard``: the program drops the result (a remote ``with``'s enter and exit): the call
    may stream as one that returns nothing, and None is returned then. ``items``: a ``next``
    whose result the program unpacks: its items come along (``ni``, iteration.keep)."""
    conn = state.connection()
    state.counts["calls"] += 1
    if discard:  # its own plans: one that returns nothing is never given a call that returns
        site += "|void"
    express_lane = pipeline and _LANE and context is None
    if express_lane:  # a call of a shape sent as a record before: its plan's checks only
        plan = conn.templates.plans.get(express.key(function, args, kwargs, site))
        if plan is not None and not plan.waits:
            sent = express.send(conn, plan, function, args, kwargs, _returns_remote)
            if sent is not express.MISS:
                return sent
        elif plan is not None and not items:
            frame = express.wait(conn, plan, function, args, kwargs, _returns_remote, _returns_none)
            if frame is not express.MISS:
                return _answered(frame, function, plan.typed, True, sys.modules[_PROXY])
    # Not at the top: proxy imports this module. Its functions are looked up on the module at
    # each call, as before, so what a test puts in their place (proxy.decode) is used.
    proxy = sys.modules[_PROXY]
    if known.answers and not known.harmless(function, site, args, kwargs, proxy.remote_kind):
        known.forget()  # it may change a tensor's metadata kept here
    typed = _typed(site, args, proxy.Remote) if BINARY else site  # for records: streamed, waiting
    if pipeline and BINARY and STREAM:
        streamed = _stream(conn, function, args, kwargs, typed, context, discard)
        if streamed is not None and express_lane:
            predicted = _returns_remote.get(typed)
            express.learn(conn, function, args, kwargs, site, typed, predicted, proxy)
        if streamed is VOID:
            return None
        if streamed is not None:
            return streamed
    if WAITS and not (items or discard) and (context is None or context == conn.context):
        frame = _wait_by_record(conn, function, args, kwargs, typed, proxy)
        if frame is not None:
            if express_lane and typed not in _returns_remote and typed not in _returns_none:
                express.learn(conn, function, args, kwargs, site, typed, None, proxy, waits=True)
            return _answered(frame, function, typed, pipeline, proxy)
    return _by_json(conn, function, args, kwargs, site, pipeline, context, discard, items, proxy)


def _by_json(
    conn: Connection,
    function: Dict[str, Any],
    args: Tuple[Any, ...],
    kwargs: Dict[str, Any],
    site: str,
    pipeline: bool,
    context: Optional[Dict[str, Any]],
    discard: bool,
    items: bool,
    proxy: Any,
) -> Any:
    """The call as a JSON frame (what no record can say: a value by structure, a callback, a
    context, a program state to sync), streamed when its site may stream, else waited for."""
    buffers: List[Any] = []
    refer = proxy.refer_for(conn, buffers)
    meta: Dict[str, Any] = {"op": ops.CALL, "f": function, "r": state.new_id()}
    if items:
        meta["ni"] = True
    meta["a"] = [codec.encode(arg, buffers, refer) for arg in args]
    if kwargs:
        meta["k"] = codec.encode(kwargs, buffers, refer)
    if context is not None and context != conn.context:
        meta["ctx"] = conn.context = context
    here = cwd.refresh()  # where the program's relative paths are, for remote code
    if here is not None and here != conn.cwd:
        meta["cwd"] = conn.cwd = here
    # While the worker holds one of our callables, every call waits: a callback's effects here
    # (a list it appends to) must have happened when the call returns, as they would locally.
    # A call that may name a file waits too: a missing file raises at the call, as locally.
    # While numpy's or torch's random state is synced, every call waits too: the program may
    # draw here, unseen, between two calls (program_state; random's draws are seen).
    program_state.before_call(conn, meta)
    tracking = tensor_sync.tracking()
    if tracking:  # the program's own tensors the worker mirrors: their changes
        meta["tw"] = tensor_sync.changed(buffers)
    synced = tracking or program_state.holds_calls() or client_objects.held()
    # Typed after encoding: a local class is told apart from another of its name once shipped.
    site = _typed(site, args, proxy.Remote)
    streams = pipeline and STREAM and not synced
    predicted = _returns_remote.get(site) if streams else None
    void = streams and predicted is None and (discard or site in _returns_none)
    where = _streams_at(site, args, kwargs) if predicted is not None or void else None
    if where is not None:
        meta["nr"] = 1
        if void:
            meta["nv"] = 1
        state.counts["streamed"] += 1
        conn.request(meta, buffers, wait=False)
        warns.pipelined(meta["r"], site, where)
        return None if void else proxy.fresh(meta["r"], predicted, conn)
    try:
        frame = conn.request(meta, buffers)
    finally:
        warns.learn(site)  # whether its answer carried a warning of its own
    assert frame is not None
    result = _answered(frame, function, site, pipeline and not discard, proxy)
    if items and "vi" in frame.meta and isinstance(result, proxy.Remote):
        iteration.keep(result, frame.meta["vi"], frame.buffers, proxy.decode)
    return result


def _answered(frame: Any, function: Dict[str, Any], site: str, learns: bool, proxy: Any) -> Any:
    """A waiting call's result; what it says of its site when it ``learns``: a remote result
    makes its later calls stream, and so does None from an operation that returns nothing.
    A numpy scalar that came with its value (sv) is used here (printed, compared): its call
    site keeps waiting, as when scalars came by value (docs/remoting.md, "numpy scalars")."""
    result = proxy.decode(frame.meta.get("v"), frame.buffers)
    if not learns:
        return result  # a discarded result (a remote ``with``): its site streams when it may
    if isinstance(result, proxy.Remote) and "sv" not in result._rd_ref:
        _returns_remote[site] = object.__getattribute__(result, "_rd_type")
    elif result is None and _void(function):
        _returns_none.add(site)
    return result


def _wait_by_record(
    conn: Any,
    function: Dict[str, Any],
    args: Tuple[Any, ...],
    kwargs: Dict[str, Any],
    site: str,
    proxy: Any,
) -> Any:
    """The answer of a call that waits, sent as the last record of a batch (data-plane
    version 3); None when it has another shape or something must be said with it (JSON)."""
    if not express.quiet(conn):
        return None
    program_state.before_call(conn, {})  # globals the program changed go first
    record = conn.templates.record(
        function, args, kwargs, state.new_id(), site, _reference(conn, proxy)
    )
    if record is None:
        return None
    state.counts["waited"] += 1
    try:
        return conn.request({"op": ops.CALL}, record=record)
    finally:
        warns.learn(site)  # whether its answer carried a warning of its own


#: What _stream gives for a streamed call that returns nothing (None means "not streamed").
VOID = object()


def _void(function: Dict[str, Any]) -> bool:
    """Whether ``function`` is an operation that returns nothing (VOID_PATHS, VOID_METHODS)."""
    tag = function.get("$")
    if tag == PATH:
        return function.get("p") in VOID_PATHS
    return tag == ATTRIBUTE and function.get("n") in VOID_METHODS


def _streams_at(site: str, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[Any]:
    """The program's frame making a call of a site that returns a remote object, when the call
    may go without waiting; None when it must wait."""
    if file_args.may_name_a_file(args, kwargs) or site in warns.sites:
        return None  # a call site that warns waits: its warnings are raised at its line
    where = guarded.program_frame()
    if guarded.in_try(where):
        return None  # its error must reach the try's handler (guarded)
    return where


def _stream(
    conn: Any,
    function: Dict[str, Any],
    args: Tuple[Any, ...],
    kwargs: Dict[str, Any],
    site: str,
    context: Optional[Dict[str, Any]],
    discard: bool,
) -> Any:
    """The result's proxy when the call went as a binary record (docs/data-plane.md,
    "Batches"), VOID when it went so and returns nothing; None when it must go as JSON: it
    waits, or it has another shape, or something else must be said with it (context, working
    directory, the client's description)."""
    predicted = _returns_remote.get(site)
    void = predicted is None and (discard or site in _returns_none)
    if (
        (predicted is None and not void)
        or (context is not None and context != conn.context)
        or not express.quiet(conn)
    ):
        return None
    where = _streams_at(site, args, kwargs)
    if where is None:
        return None
    # Globals the program changed go first. Before the template is made: a definition made but
    # not sent would leave the worker without it (a raise here) and the stream out of step.
    program_state.before_call(conn, {})
    proxy = sys.modules["radium_interposer.proxy"]
    r = state.new_id()
    record = conn.templates.record(function, args, kwargs, r, site, _reference(conn, proxy), void)
    if record is None:
        return None
    state.counts["streamed"] += 1
    state.counts["records"] += 1
    conn.stream(record)
    warns.pipelined(r, site, where)
    return VOID if void else proxy.fresh(r, predicted, conn)


def _reference(conn: Any, proxy: Any) -> Any:
    """The tree of a remote object or module used on ``conn`` (None for anything else)."""
    reference = proxy.reference
    return lambda obj: reference(obj, conn)


def _typed(site: str, args: Tuple[Any, ...], remote: type) -> str:
    """The call site with the types its arguments bring: a result's type may follow them
    (``a.view(Sub)``, an operand of a subclass), so a type predicted for one combination is
    never given to another's result. ``remote`` is the proxy class (proxy.Remote)."""
    kinds, typed = "", False  # a string built in a loop: this runs on every call
    for arg in args:
        if isinstance(arg, remote):
            kinds, typed = kinds + object.__getattribute__(arg, "_rd_type") + ",", True
        elif isinstance(arg, type):  # two local classes of one name: two kinds
            kinds, typed = kinds + nested.type_name(arg) + ",", True
        else:
            kinds += ","
    return f"{site}|{kinds}" if typed else site
