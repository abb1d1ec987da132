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

import ast
import inspect
import os
import sys
import sysconfig
import textwrap
import threading
import types
import weakref
from typing import Any, Dict, List, Optional, Tuple

from radium_interposer import classes, codec, proxy, structs
from radium_interposer.client import state
from radium_interposer.errors import RemoteError

#: What a local class written on remote bases keeps of its body here.
_KEPT = ("__module__", "__qualname__", "__doc__", "__firstlineno__", "__classcell__")
#: The worker path of each shipped user class or function (by identity, not kept alive).
_shipped: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
_lock = threading.RLock()


class ShipError(RemoteError):
    """A class or function of the user's code cannot be sent to the worker (no source)."""


def local_class(mcs: type, name: str, bases: Tuple[type, ...], namespace: Dict[str, Any]) -> type:
    """The local side of a class statement on remote bases: its name and origin, no body (the
    body runs on the worker; a method left here would run here)."""
    kept = {key: value for key, value in namespace.items() if key in _KEPT}
    return type.__new__(mcs, name, bases, {**kept, "__slots__": ()})


def ship_class(cls: type) -> str:
    """The worker path of a user class, shipping it (and what it needs) the first time."""
    return _ship(cls)


def ship_function(function: Any) -> str:
    """The worker path of a user function, shipping it (and what it needs) the first time."""
    return _ship(function)


def _ship(obj: Any) -> str:
    with _lock:
        path = _known(obj)
        if path is not None:
            return path
        module = sys.modules.get(obj.__module__)
        if module is None:
            raise ShipError(f"{obj.__qualname__}: its module {obj.__module__} is not loaded")
        batch = _Batch(module)
        batch.add(obj)
        batch.send()
        return _shipped[obj]


def _known(obj: Any) -> Optional[str]:
    if isinstance(obj, type) and classes.path_of(obj) is not None:
        return classes.path_of(obj)
    return _shipped.get(obj)


def is_users(obj: Any) -> bool:
    """A class or function of the user's own code: not yet shipped, and from ``__main__`` or a
    file outside the standard library and the installed packages."""
    if isinstance(obj, classes.RemoteType):
        return classes.path_of(obj) is None  # stand-ins have a path from the start
    if not isinstance(obj, (type, types.FunctionType)):
        return False
    module = sys.modules.get(getattr(obj, "__module__", None) or "")
    if module is None or module.__name__ == "__main__":
        return module is not None
    path = getattr(module, "__file__", None)
    return bool(path) and not str(path).startswith(_libraries())


def _libraries() -> Tuple[str, ...]:
    """Where installed code lives: the standard library and every site/dist-packages."""
    paths = {sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    paths.update(p for p in sys.path if p.endswith(("site-packages", "dist-packages")))
    paths.add(os.path.dirname(os.path.dirname(os.path.abspath(classes.__file__))))  # the bundle
    return tuple(sorted(paths))


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
            return None
    return structs.class_path(cls)


def callable_ref(obj: Any) -> Optional[Dict[str, Any]]:
    """A reference to a function for the worker: the user's top-level ones shipped, library and
    builtin ones by import path (when that path leads back to them); None for anything else
    (lambdas, closures, functions without source: the caller makes them callbacks)."""
    if getattr(obj, "__radium_remote__", False):  # a split-file function: its own code, shipped
        obj = getattr(obj, "__wrapped__", obj)
    if isinstance(obj, types.FunctionType) and is_users(obj):
        if obj.__qualname__ != obj.__name__ or obj.__name__ == "<lambda>" or obj.__closure__:
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
        for name in sorted(_names(source)):
            self._bind(name, obj)
        self.defs.append({"src": source, "line": line, "file": filename})
        self.objects.append(obj)

    def _bind(self, name: str, owner: Any) -> None:
        """A global the definition refers to: its definition, or its value, for the worker."""
        namespace = vars(self.module)
        if name in self.names or name not in namespace or namespace[name] is owner:
            return
        value = namespace[name]
        if is_users(value) and getattr(value, "__module__", None) == self.module.__name__:
            self.add(value)  # the module's own: defined there too, first
            return
        self.names[name] = value

    def send(self) -> None:
        buffers: List[Any] = []
        tree: Dict[str, List[Any]] = {"k": [], "v": []}
        for name, value in self.names.items():
            try:
                encoded = codec.encode(value, buffers, _refer)
            except (codec.EncodeError, ShipError):
                continue  # used on the worker, it is a NameError there, naming it
            tree["k"].append(name)
            tree["v"].append(encoded)
        meta = {"op": "ship", "mod": self.module.__name__, "defs": self.defs,
                "g": {"$": "d", **tree}}  # fmt: skip
        frame = state.connection().request(meta, buffers)
        assert frame is not None
        namespace = str(frame.meta["ns"])
        for obj in self.objects:
            path = f"{namespace}.{obj.__qualname__}"
            _shipped[obj] = path
            if isinstance(obj, classes.RemoteType):
                obj.__radium_path__ = path  # type: ignore[attr-defined]
                classes.register(path, obj)


def _refer(obj: Any) -> Optional[Dict[str, Any]]:
    """References in a shipped module's globals: modules by name, remote objects, library
    functions and classes by path."""
    if isinstance(obj, types.ModuleType):
        return {"$": "m", "n": obj.__name__}
    ref = proxy.reference(obj)
    return ref if ref is not None else callable_ref(obj)


def _names(source: str) -> set:  # type: ignore[type-arg]
    """Every name a definition's source mentions (a superset of the globals it uses)."""
    return {node.id for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Name)}
