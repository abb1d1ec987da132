"""Proxies for objects that live on the worker.

A ``Remote`` stands for a handle (an object left remote), a path (``numpy.linalg.inv``) or a
method of either. Calling it, indexing it, using an operator on it, ... runs on the worker
through :func:`radium_interposer.calls.invoke` (re-exported here), which pipelines the calls of
sites that return remote objects. Results that are small and plain come back as values; the
rest stay remote as new proxies.
"""

from __future__ import annotations

import types
from typing import Any, Callable, Dict, List, Optional, Tuple

from radium_interposer import (
    callbacks,
    client_objects,
    codec,
    exits,
    known,
    operators,
    ops,
    pickled,
    reads,
    received,
    upcalls,
)
from radium_interposer.calls import invoke as invoke  # where callers have always found it
from radium_interposer.client import Connection, state
from radium_interposer.reads import call as _call
from radium_interposer.reads import remote_kind as remote_kind  # calls.invoke finds it here
from radium_interposer.tags import ATTRIBUTE, HANDLE, HELD, MODULE

__all__ = [
    "Remote",
    "decode",
    "fetch",
    "fresh",
    "invoke",
    "make",
    "refer_for",
    "reference",
    "remote_kind",
    "request",
    "slot_readers",
    "stats",
    "unpickle",
]

#: Method names of remote types, so ``obj.method`` needs no round trip.
_methods: Dict[str, frozenset] = {}  # type: ignore[type-arg]


def refer_for(conn: Connection, buffers: Optional[List[Any]] = None) -> codec.Refer:
    """How arguments sent on ``conn`` refer to what is not a value: remote objects by handle,
    the user's top-level functions shipped, library functions by path, this process's own
    library objects by pickle (with ``buffers``), other callables as callbacks."""

    def refer(obj: Any) -> Optional[Dict[str, Any]]:
        ref = reference(obj, conn)
        if ref is None:
            # The program's files and numpy-protocol objects by reference: before callbacks.
            ref = client_objects.reference(obj) or upcalls.bound.callable_ref(obj)
            if ref is None and buffers is not None:
                ref = pickled.reference(obj, buffers)  # before callbacks: a module is callable
            ref = ref or callbacks.reference(obj)
        return ref

    return refer


def reference(obj: Any, conn: Optional[Connection] = None) -> Optional[Dict[str, Any]]:
    """The reference tree of a remote object or remote module, or None for anything else."""
    if isinstance(obj, Remote):
        origin = object.__getattribute__(obj, "_rd_conn")
        if origin is not None and origin is not conn and origin.unsynced:
            # Its result must exist before another connection refers to it. Quiet: an error of
            # that connection's streamed calls is raised in its own thread, not in this one.
            origin.sync(quiet=True)
        return object.__getattribute__(obj, "_rd_ref")  # type: ignore[no-any-return]
    if isinstance(obj, types.ModuleType) and getattr(obj, "__radium_remote__", False):
        return {"$": MODULE, "n": obj.__name__}
    return None


def decode(tree: Any, buffers: List[Any]) -> Any:
    """A value from the worker. It never makes this process import anything (codec.loaded):
    modules and classes it names must be this program's own already, or remoted."""
    try:
        return codec.decode(tree, buffers, _resolve)
    except RecursionError:  # nested deeper than the stack allows: refused like any bad value
        raise codec.DecodeError("a value from the worker is nested too deeply") from None


def make(
    ref: Dict[str, Any], type_name: str, conn: Optional[Connection], owner: Optional[Remote] = None
) -> Remote:
    """The proxy of a remote object: an instance of its class's stand-in (plain for paths and
    methods, which have no class of their own here)."""
    cls: type = Remote
    if type_name and ref["$"] in HELD:
        cls = upcalls.bound.proxy_class(type_name)
    proxy: Remote = object.__new__(cls)
    Remote.__init__(proxy, ref, type_name, conn, owner)
    return proxy


#: Resolves the references in a worker's value (:func:`decode`), its proxies made by ``make``.
_resolve = received.resolver(make)


def request(op: str, **fields: Any) -> Dict[str, Any]:
    """A synchronous non-call operation (import, fetch, methods, ...): its reply metadata."""
    frame = state.connection().request({"op": op, **fields})
    assert frame is not None
    meta: Dict[str, Any] = frame.meta
    meta["buffers"] = frame.buffers
    return meta


class Remote(reads.Reads):
    """An object on the worker. Attribute access, calls and operators run remotely."""

    __slots__ = ("__weakref__", "_rd_conn", "_rd_owner", "_rd_ref", "_rd_type")

    def __init__(
        self,
        ref: Dict[str, Any],
        type_name: str,
        conn: Optional[Connection],
        owner: Optional[Remote] = None,
    ) -> None:
        # A method proxy keeps its object's proxy alive (owner): the object must outlive the call.
        _fill(self, ref, type_name, conn, owner)
        if ref["$"] == HANDLE:
            live = state.live
            live[ref["id"]] = live.get(ref["id"], 0) + 1

    def __del__(self) -> None:
        try:
            ref = _get_ref(self)
            if ref["$"] == HANDLE:
                live, handle = state.live, ref["id"]
                if live.get(handle, 0) > 1:
                    live[handle] -= 1
                else:
                    live.pop(handle, None)
                state.releases.append((_get_conn(self), handle))
        except Exception:  # interpreter shutdown: the worker frees everything with the lease
            pass

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            # numpy & co. probe dunders (``__array_interface__``...): never answer remotely.
            raise AttributeError(name)
        kind = _get_type(self)
        ref = _get_ref(self)
        if kind and name in (_methods.get(kind) or _methods_of(self, kind)):
            method: Remote = object.__new__(Remote)  # made at every ``x.add(y)``: as make would
            _fill(method, {"$": ATTRIBUTE, "o": ref, "n": name}, f"{kind}.{name}", None, self)
            return method
        return reads.attribute(self, kind, ref, name)

    def __setattr__(self, name: str, value: Any) -> None:
        _call("builtins.setattr", self, name, value, pipeline=True)

    def __delattr__(self, name: str) -> None:
        _call("builtins.delattr", self, name, pipeline=True)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        ref = object.__getattribute__(self, "_rd_ref")
        site = str(ref.get("p") or object.__getattribute__(self, "_rd_type"))
        if ref["$"] == ATTRIBUTE and ref["n"] in known.METHODS and not kwargs:  # x.size(0), x.dim()
            return reads.metadata(ref, site, args, lambda: invoke(ref, args, kwargs, site))
        return invoke(ref, args, kwargs, site)

    def __setitem__(self, key: Any, value: Any) -> None:
        _call("operator.setitem", self, key, value, pipeline=True)

    def __delitem__(self, key: Any) -> None:
        _call("operator.delitem", self, key, pipeline=True)

    def __enter__(self) -> Any:  # marks where its body's calls begin
        return exits.enter_remote(self._rd_ref)

    def __exit__(self, *exc_info: Any) -> bool:  # the body's exception crosses to the manager
        return exits.exit_remote(self, *exc_info)

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        import numpy

        return numpy.asarray(fetch(self), dtype=dtype)

    def __dir__(self) -> List[str]:
        return sorted(_methods_of(self, object.__getattribute__(self, "_rd_type")))

    def __copy__(self) -> Any:
        return _call("copy.copy", self)

    def __deepcopy__(self, memo: Dict[int, Any]) -> Any:
        return _call("copy.deepcopy", self)

    def __reduce_ex__(self, protocol: Any) -> Any:
        """Pickled by the worker: the bytes are its pickle, loaded again there (``unpickle``)."""
        data = fetch(_call("pickle.dumps", self, protocol))
        return unpickle, (data,)


# The slots' own descriptors: a proxy is made and dropped for every streamed call, and these
# skip object.__setattr__'s lookup by name (Remote.__setattr__ itself is remote).
_set_ref, _set_type = Remote._rd_ref.__set__, Remote._rd_type.__set__  # type: ignore[attr-defined]
_set_conn, _set_owner = Remote._rd_conn.__set__, Remote._rd_owner.__set__  # type: ignore[attr-defined]
_get_ref, _get_conn = Remote._rd_ref.__get__, Remote._rd_conn.__get__  # type: ignore[attr-defined]
_get_type = Remote._rd_type.__get__  # type: ignore[attr-defined]


def slot_readers() -> Tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    """What reads a proxy's reference tree and its connection: its slots' own getters, which no
    class's ``__getattribute__`` can answer instead (and cheaper than object's)."""
    return _get_ref, _get_conn


def _fill(
    proxy: Remote,
    ref: Dict[str, Any],
    type_name: str,
    conn: Optional[Connection],
    owner: Optional[Remote],
) -> None:
    _set_ref(proxy, ref)
    _set_type(proxy, type_name)
    _set_conn(proxy, conn)
    _set_owner(proxy, owner)


def fresh(handle: int, type_name: str, conn: Connection) -> Remote:
    """The proxy of a streamed call's result: ``handle`` is new, this is its only proxy."""
    proxy: Remote = object.__new__(upcalls.bound.proxy_class(type_name))
    _fill(proxy, {"$": HANDLE, "id": handle}, type_name, conn, None)
    state.live[handle] = 1
    return proxy


def _methods_of(obj: Remote, kind: str) -> frozenset:  # type: ignore[type-arg]
    names = _methods.get(kind)
    if names is None:
        names = frozenset(
            request(ops.METHODS, o=object.__getattribute__(obj, "_rd_ref"))["methods"]
        )
        _methods[kind] = names
    return names


operators.install(Remote, invoke)


def unpickle(data: bytes) -> Any:
    """A pickled remote object, loaded again on the worker (where it was pickled)."""
    return _call("pickle.loads", data)


def fetch(obj: Any) -> Any:
    """A remote object's value here: arrays as numpy arrays when this program imported numpy,
    else as nested lists (a shaped memoryview past ``arrays.LIST_ITEMS`` items)."""
    if not isinstance(obj, Remote):
        return obj
    meta = request(ops.FETCH, o=object.__getattribute__(obj, "_rd_ref"))
    return decode(meta.get("v"), meta["buffers"])


def stats() -> Dict[str, Any]:
    """The worker's counters: calls, bytes in and out, busy seconds, live handles."""
    return dict(request(ops.STATS)["stats"])
