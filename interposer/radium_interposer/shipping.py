"""The user's own classes and functions, shipped to the worker as source (docs/remoting.md).

``class Net(nn.Module): ...`` runs its body here as usual; then the local class keeps only its
name and origin. Its objects live on the worker, and their proxies are its instances. On first
use (construction, a class attribute, a type check) its source is sent to the worker with what
its body refers to in its module:
- modules: imported there by name;
- remote objects: by reference;
- plain values: by value;
- the module's own functions and classes: their source, recursively, dependencies first.

Classes of the user's code that are not on remote bases (a dataclass, a helper) and top-level
functions passed as arguments are shipped the same way when they cross. The user's code is the
code outside the standard library and site-packages. Library classes are named by import path.
Everything lands in ``radium_shipped.<module>`` on the worker (:mod:`radium_interposer.shipped`).
A module's definitions go together (:mod:`~radium_interposer.shipping_batch`), and where each
went is kept (:mod:`~radium_interposer.shipped_paths`).
"""

from __future__ import annotations

import sys
import threading
import types
from typing import Any, Callable, Dict, List, Optional

from radium_interposer import classes, local_defs, nested, proxy, reflection, shipped, user_modules
from radium_interposer.errors import RemoteError
from radium_interposer.shipped_paths import is_users
from radium_interposer.shipped_paths import known as _known
from radium_interposer.shipped_paths import remember as _remember
from radium_interposer.shipping_batch import Batch, ShipError
from radium_interposer.tags import MODULE, PATH

__all__ = [
    "ShipError",
    "callable_ref",
    "class_ref",
    "resend",
    "ship_class",
    "ship_function",
    "users_path",
]

_lock = threading.RLock()


def ship_class(cls: type) -> str:
    """The worker path of a user class, shipping it (and what it needs) the first time."""
    return _ship(cls)


def ship_function(function: Any) -> str:
    """The worker path of a user function, shipping it (and what it needs) the first time."""
    return _ship(function)


def _ship(obj: Any) -> str:
    with _lock:
        path = _known(obj) or _in_flight.get(id(obj))
        if path is not None:
            return path
        if local_defs.is_local(obj):  # a class runs there unless it uses the function's locals
            why = local_defs.refusal(obj) if isinstance(obj, type) else nested.local_message(obj)
            if why is not None:
                raise ShipError(why)
        # Already there without shipping it alone: in its module (one of the program's own,
        # shipped whole) or in its shipped outer class.
        whole = isinstance(obj, type)
        path = user_modules.import_path(obj) or nested.in_outer(obj, _outer_path(whole))
        if path is not None:
            _remember(obj, path, path)
            return path
        module = sys.modules.get(obj.__module__)
        if module is None:
            raise ShipError(f"{obj.__qualname__}: its module {obj.__module__} is not loaded")
        batch = Batch(module, _refer)
        batch.add(obj)
        # Their paths while they are sent: one that refers to itself (a recursive function,
        # through its split stand-in) is named by its path, not shipped again and again.
        where = f"{shipped.ROOT}.{module.__name__}"
        _in_flight.update((id(o), nested.worker_path(where, batch.key(o))) for o in batch.objects)
        try:
            batch.send()
        finally:
            for done in batch.objects:
                _in_flight.pop(id(done), None)
        path = _known(obj)
        assert path is not None  # the batch remembered where each of its definitions went
        return path


def _outer_path(whole: bool) -> Callable[[type], Optional[str]]:
    """Where the class holding a nested definition is on the worker: known, or shipped now.
    One on remote bases must be there to exist at all; a plain one goes ``whole`` for a nested
    class, so that it is its attribute there and ``Outer.Inner`` in shipped code is that same
    class, not a second one (not for a nested function). None: not there (it goes alone)."""

    def place(outer: type) -> Optional[str]:
        known = _known(outer)
        if known is not None or isinstance(outer, classes.RemoteType):
            return known or _ship(outer)
        if not whole or not is_users(outer):
            return None
        try:
            return _ship(outer)
        except RemoteError:  # no source, or its body fails there: the nested class alone
            return None

    return place


#: The worker paths of the definitions being sent, by id (their batch keeps them alive).
_in_flight: Dict[int, str] = {}


def class_ref(cls: type) -> Optional[str]:
    """How this side names a class to the worker (the codec's hook): stand-ins and shipped
    classes by their worker path, the user's classes shipped first, others by import path."""
    known = _known(cls)
    if known is not None:
        return known
    if is_users(cls):
        try:
            return _ship(cls)
        except ShipError:
            if isinstance(cls, classes.RemoteType):
                raise  # its body is nowhere else: its reason, not a vaguer error later
            return None
    return reflection.class_path(cls)


def users_path(obj: Any) -> Optional[str]:
    """The worker path of one of the user's classes or functions, shipped first (pickles name
    them by it: the worker has no ``__main__.Dataset`` of its own); None for anything else."""
    if not is_users(obj):
        return None
    if isinstance(obj, type):
        return class_ref(obj)
    ref = callable_ref(obj)
    path = ref.get("p") if ref is not None else None
    return path if isinstance(path, str) else None


def callable_ref(obj: Any) -> Optional[Dict[str, Any]]:
    """A reference to a function for the worker: the user's top-level ones shipped, library and
    builtin ones by import path (when that path leads back to them); None for anything else
    (lambdas, closures, functions without source: the caller makes them callbacks)."""
    if getattr(obj, "__radium_remote__", False):  # a split-file function: its own code, shipped
        obj = getattr(obj, "__wrapped__", obj)
    if isinstance(obj, types.FunctionType) and is_users(obj):
        if "<locals>" in obj.__qualname__ or obj.__name__ == "<lambda>" or obj.__closure__:
            return None
        try:
            return {"$": PATH, "p": _ship(obj)}
        except ShipError:
            return None
    if not isinstance(obj, (types.FunctionType, types.BuiltinFunctionType)):
        return None
    module = sys.modules.get(getattr(obj, "__module__", None) or "")
    found: Any = module
    for part in str(getattr(obj, "__qualname__", "<")).split("."):
        found = getattr(found, part, None)
    return {"$": PATH, "p": f"{obj.__module__}.{obj.__qualname__}"} if found is obj else None


def _refer(obj: Any) -> Optional[Dict[str, Any]]:
    """References in a shipped module's globals: modules by name, remote objects, library
    functions and classes by path."""
    if isinstance(obj, types.ModuleType):
        user_modules.refer(obj)  # the program's own modules first, so the worker has them
        return {"$": MODULE, "n": obj.__name__}
    ref = proxy.reference(obj)
    return ref if ref is not None else callable_ref(obj)


#: The owner of globals sent again: none (a global bound to None is sent like any other).
_RESEND = object()


def resend(module: types.ModuleType, names: List[str]) -> None:
    """Send again globals of ``module`` that shipped code uses and that appeared or were rebound
    since they were sent (before the program's next call: program_state)."""
    with _lock:
        batch = Batch(module, _refer)
        for name in names:
            batch.bind(name, _RESEND)
        batch.send()
