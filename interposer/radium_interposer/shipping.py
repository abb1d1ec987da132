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
"""

from __future__ import annotations

import inspect
import sys
import textwrap
import threading
import types
import weakref
from typing import Any, Callable, Dict, List, Optional

from radium_interposer import (
    classes,
    code_origin,
    codec,
    local_defs,
    nested,
    ops,
    pickled,
    program_state,
    proxy,
    shipped,
    structs,
    user_modules,
)
from radium_interposer.client import state
from radium_interposer.errors import RemoteError

__all__ = [
    "ShipError",
    "callable_ref",
    "class_ref",
    "is_users",
    "resend",
    "ship_class",
    "ship_function",
    "users_path",
]

#: The worker path of each shipped user class or function (by identity, not kept alive).
_shipped: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
_lock = threading.RLock()


class ShipError(RemoteError):
    """A class or function of the user's code cannot be sent to the worker (no source)."""


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
        batch = _Batch(module)
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
        return _shipped[obj]


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


def _known(obj: Any) -> Optional[str]:
    if isinstance(obj, type) and classes.path_of(obj) is not None:
        return classes.path_of(obj)
    return _shipped.get(obj)


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
    return structs.class_path(cls)


def is_users(obj: Any) -> bool:
    """A class or function of the user's own code not yet shipped (code_origin.is_users; a
    class on remote bases until it has its worker path, which stand-ins have from the start)."""
    if isinstance(obj, classes.RemoteType):
        return classes.path_of(obj) is None
    return code_origin.is_users(obj)


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
            return {"$": "p", "p": _ship(obj)}
        except ShipError:
            return None
    if not isinstance(obj, (types.FunctionType, types.BuiltinFunctionType)):
        return None
    module = sys.modules.get(getattr(obj, "__module__", None) or "")
    found: Any = module
    for part in str(getattr(obj, "__qualname__", "<")).split("."):
        found = getattr(found, part, None)
    return {"$": "p", "p": f"{obj.__module__}.{obj.__qualname__}"} if found is obj else None


class _Batch:
    """Definitions of one module to send together, each after those it refers to."""

    def __init__(self, module: types.ModuleType) -> None:
        self.module = module
        self.defs: List[Dict[str, Any]] = []
        self.names: Dict[str, Any] = {}
        self.objects: List[Any] = []
        self.seen: set = set()  # type: ignore[type-arg]
        self.keys: Dict[int, str] = {}  # local classes' own paths (local_defs.unique_key)

    def key(self, obj: Any) -> str:
        """Where the worker keeps ``obj`` in its namespace: its qualname, one of its own for a
        class defined in a function."""
        return self.keys.get(id(obj)) or str(obj.__qualname__)

    def add(self, obj: Any) -> None:
        if id(obj) in self.seen or _known(obj) is not None:
            return
        self.seen.add(id(obj))
        try:
            lines, line = inspect.getsourcelines(obj)
            filename = inspect.getsourcefile(obj) or ""
        except (OSError, TypeError) as exc:
            raise ShipError(
                f"{obj.__qualname__} cannot run on the worker: its source is not available "
                f"({exc}); define it in a file"
            ) from None
        source = textwrap.dedent("".join(lines))
        for name in sorted(program_state.global_names(source)):  # not its locals
            self._bind(name, obj)
        self.defs.append({"src": source, "line": line, "file": filename})
        if local_defs.is_local(obj):
            self.keys[id(obj)] = self.defs[-1]["k"] = local_defs.unique_key(obj.__qualname__)
        self.objects.append(obj)

    def _bind(self, name: str, owner: Any) -> None:
        """A global the definition refers to: its definition, or its value, for the worker.
        Watched from now on: sent again once it appears or is rebound (program_state)."""
        namespace = vars(self.module)
        if name not in namespace:
            program_state.watch(self.module.__name__, name)  # assigned later (in __main__)
            return
        value = namespace[name]
        if name in self.names or value is owner:
            return
        program_state.note(value, owner)
        program_state.watch(self.module.__name__, name, value)
        if (
            is_users(value)
            and getattr(value, "__module__", None) == self.module.__name__
            and _known(value) is None
        ):
            self.add(value)  # the module's own: defined there too, first
            return
        self.names[name] = value  # shipped ones too: by path (a name rebound to one of them)

    def send(self) -> None:
        buffers: List[Any] = []
        tree: Dict[str, List[Any]] = {"k": [], "v": []}
        unsent: Dict[str, str] = {}
        for name, value in self.names.items():
            try:
                encoded = codec.encode(value, buffers, _globals_refer(buffers))
            except (codec.EncodeError, ShipError) as exc:
                # Bound there to a stand-in that raises this at any use: never a bare NameError.
                unsent[name] = pickled.why_unsent(self.module.__name__, name, value, exc)
                continue
            tree["k"].append(name)
            tree["v"].append(encoded)
        for definition, obj in zip(self.defs, self.objects):
            if "." in obj.__qualname__:  # nested in a class: defined apart (nested.py)
                definition["q"] = obj.__qualname__
        meta = {"op": ops.SHIP, "mod": self.module.__name__, "defs": self.defs,
                "g": {"$": "d", **tree}}  # fmt: skip
        if unsent:
            meta["x"] = unsent
        frame = state.connection().request(meta, buffers)
        assert frame is not None
        namespace = str(frame.meta["ns"])
        for obj in self.objects:
            path = nested.worker_path(namespace, self.key(obj))
            _remember(obj, path, f"{namespace}.{obj.__qualname__}")


def _remember(obj: Any, path: str, known_as: str) -> None:
    """``obj`` is at ``path`` on the worker, and its instances' type is named ``known_as``."""
    _shipped[obj] = path
    if isinstance(obj, classes.RemoteType):
        obj.__radium_path__ = path  # type: ignore[attr-defined]
        classes.register(path, obj)
        classes.register(known_as, obj)
    # Defined there by its body (a plain outer class's too): objects of them made there are
    # instances of the program's nested classes here.
    for name, inner in classes.inner_classes(obj) if isinstance(obj, type) else ():
        if _known(inner) is None:
            _remember(inner, f"{path}.{name}", f"{known_as}.{name}")


def _refer(obj: Any) -> Optional[Dict[str, Any]]:
    """References in a shipped module's globals: modules by name, remote objects, library
    functions and classes by path."""
    if isinstance(obj, types.ModuleType):
        user_modules.refer(obj)  # the program's own modules first, so the worker has them
        return {"$": "m", "n": obj.__name__}
    ref = proxy.reference(obj)
    return ref if ref is not None else callable_ref(obj)


def _globals_refer(buffers: List[Any]) -> codec.Refer:
    """How a shipped module's globals refer to what is not a value: as :func:`_refer`, and
    this process's own library objects (a torch.device, a tensor of its torch) by pickle."""

    def refer(obj: Any) -> Optional[Dict[str, Any]]:
        ref = _refer(obj) or program_state.bound_method_ref(obj)
        return ref or pickled.reference(obj, buffers)

    return refer


#: The owner of globals sent again: none (a global bound to None is sent like any other).
_RESEND = object()


def resend(module: types.ModuleType, names: List[str]) -> None:
    """Send again globals of ``module`` that shipped code uses and that appeared or were rebound
    since they were sent (before the program's next call: program_state)."""
    with _lock:
        batch = _Batch(module)
        for name in names:
            batch._bind(name, _RESEND)
        batch.send()
