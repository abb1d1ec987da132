"""Local stand-ins for remote classes: real local types, so that ``isinstance``, ``issubclass``,
``type(x) is C``, ``except C`` and ``class Net(nn.Module)`` work with classes that live on the
worker. Semantics: docs/remoting.md.

One stand-in per remote class, keyed by the class's import path on the worker (so
``torch.nn.Module`` and ``torch.nn.modules.module.Module`` are one class here). A stand-in's
instances are the proxies of that class's objects. Calling a stand-in constructs remotely; its
attributes are the remote class's. Stand-ins of exception classes are exceptions here, raised
for the remote exceptions of that class. A class statement on a stand-in base makes a local
class that is shipped to the worker on first use (:mod:`radium_interposer.shipping`).
"""

from __future__ import annotations

import builtins
import sys
import threading
from typing import Any, Dict, List, Optional, Tuple

from radium_interposer import ops, proxy, reflection, scalar_proxies, upcalls
from radium_interposer.errors import RemoteError
from radium_interposer.tags import ATTRIBUTE, HELD, PATH

__all__ = [
    "RemoteType",
    "for_instances",
    "inner_classes",
    "is_inner",
    "local_or_stand_in",
    "path_of",
    "register",
    "stand_in",
]

#: Stand-ins (and shipped local classes) by remote import path.
_stand_ins: Dict[str, type] = {}
#: Answers of remote isinstance/issubclass checks, by (type, class) path: they depend on both
#: classes only.
_checks: Dict[Tuple[str, str], bool] = {}
_lock = threading.Lock()
#: The callables of each remote class itself, by its path (RemoteType.__getattr__).
_methods: Dict[str, frozenset] = {}  # type: ignore[type-arg]


def path_of(cls: type) -> Optional[str]:
    """The remote import path of a stand-in, or of a shipped local class (None: not yet)."""
    path = cls.__dict__.get("__radium_path__")
    return path if isinstance(path, str) else None


#: What a local class written on remote bases keeps of its body here.
_KEPT = ("__module__", "__qualname__", "__doc__", "__firstlineno__", "__classcell__")


class RemoteType(type):
    """The metaclass of stand-ins, and so of local classes written on remote bases."""

    def __new__(mcs, name: str, bases: Tuple[type, ...], namespace: Dict[str, Any]) -> Any:
        if "__radium_path__" in namespace:  # made by stand_in(), below
            return super().__new__(mcs, name, bases, namespace)
        # A class statement on remote bases: its name and origin, no body (the body runs on
        # the worker, where it is shipped on first use; a method left here would run here).
        # Its classes on remote bases (``class Inner(nn.Module)`` in its body) stay: bodiless
        # too, the worker's ``Outer.Inner``.
        kept = {k: v for k, v in namespace.items() if k in _KEPT or is_inner(k, v, namespace)}
        return super().__new__(mcs, name, bases, {**kept, "__slots__": ()})

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if issubclass(cls, BaseException):  # raised here, for a remote exception of its class
            return type.__call__(cls, *args, **kwargs)
        path = _ensure_remote(cls)
        # Its own call site: what constructing returns says nothing of calling an instance.
        return proxy.invoke({"$": PATH, "p": path}, args, kwargs, f"{path}()")

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        path = _ensure_remote(cls)
        if name in _class_methods(path):  # ``Function.apply``: resolved where it is called
            ref = {"$": ATTRIBUTE, "o": {"$": PATH, "p": path}, "n": name}
            return proxy.make(ref, f"{path}.{name}", None)
        return proxy.invoke(_GETATTR, (cls, name), {}, "", False)

    def __instancecheck__(cls, obj: Any) -> bool:
        if type.__instancecheck__(cls, obj):
            return True
        if not isinstance(obj, proxy.Remote) or obj._rd_ref.get("$") not in HELD:
            return False
        return _remote_check("isinstance", obj, object.__getattribute__(obj, "_rd_type"), cls)

    def __subclasscheck__(cls, sub: Any) -> bool:
        if type.__subclasscheck__(cls, sub):
            return True
        if not isinstance(sub, RemoteType) or path_of(sub) is None:
            return False
        return _remote_check("issubclass", sub, str(path_of(sub)), cls)

    def __repr__(cls) -> str:
        return f"<remote class {path_of(cls) or cls.__qualname__!r}>"


_GETATTR = {"$": PATH, "p": "builtins.getattr"}


def _ensure_remote(cls: type) -> str:
    """The class's remote path, shipping a local class written on remote bases first."""
    path = path_of(cls)
    if path is None:
        path = upcalls.bound.ship_class(cls)
    return path


def _class_methods(path: str) -> frozenset:  # type: ignore[type-arg]
    """The callables of the remote class at ``path`` itself (the ``methods`` operation with
    ``c``), asked once: ``Cls.name`` for one of them is a method reference, no round trip."""
    names = _methods.get(path)
    if names is None:
        answer = proxy.request(ops.METHODS, o={"$": PATH, "p": path}, c=True)
        names = _methods[path] = frozenset(answer["methods"])
    return names


def _remote_check(check: str, subject: Any, subject_type: str, cls: type) -> bool:
    key = (subject_type, _ensure_remote(cls))
    answer = _checks.get(key)
    if answer is None:
        answer = bool(proxy.invoke({"$": PATH, "p": f"builtins.{check}"}, (subject, cls), {}, ""))
        _checks[key] = answer
    return answer


def stand_in(path: str, exception: Any = 0) -> type:
    """The stand-in of the remote class at ``path`` (made once); ``exception``: 0, or the name
    of the remote exception class's nearest builtin exception."""
    with _lock:
        found = _stand_ins.get(path)
        if found is None:
            name = path.rpartition(".")[2] or path
            namespace: Dict[str, Any] = {"__radium_path__": path, "__module__": _module(path)}
            if exception:
                found = RemoteType(name, _exception_bases(exception), namespace)
            else:  # numpy's scalar types: proxies that print without a round trip
                base = scalar_proxies.bases(path)
                found = RemoteType(name, base, {**namespace, "__slots__": ()})
            _stand_ins[path] = found
        return found


def _exception_bases(builtin: Any) -> Tuple[type, ...]:
    base = getattr(builtins, str(builtin), None)
    if isinstance(base, type) and issubclass(base, BaseException) and base is not Exception:
        return (base, RemoteError)  # `except RuntimeError` catches a remote LinAlgError
    return (RemoteError,)


def register(path: str, cls: type) -> None:
    """A local class shipped to the worker: its objects' proxies are its instances."""
    with _lock:
        _stand_ins[path] = cls


def for_instances(type_name: str) -> type:
    """The class of the proxy of a remote object of type ``type_name``."""
    found = _stand_ins.get(type_name)
    if found is not None and issubclass(found, proxy.Remote):
        return found
    if found is not None or not type_name:  # an exception object, or no type: a plain proxy
        return proxy.Remote
    return stand_in(type_name)


def local_or_stand_in(path: str, exception: Any) -> type:
    """The class a worker names by ``path``: this side's own when it has that module locally
    (``builtins.float``, a stdlib class), else the stand-in of the remote class."""
    module = path.rpartition(".")[0]
    loaded = sys.modules.get(module)
    if loaded is not None and not reflection.remote_module(loaded):
        found: Any = loaded
        for part in path[len(module) + 1 :].split("."):
            found = reflection.own_attribute(found, part)  # nothing runs on the worker's word
        # The same check the codec makes, in reverse: that path leads back to this class.
        if isinstance(found, type) and reflection.class_path(found) == path:
            return found
    known = _stand_ins.get(path)
    return known if known is not None else stand_in(path, exception)


def _module(path: str) -> str:
    """The module part of a path (the class's ``__module__``, for reprs and tracebacks)."""
    return path.rpartition(".")[0]


def is_inner(name: str, value: Any, namespace: Dict[str, Any]) -> bool:
    """Whether a class body's ``name`` binds a class of the program nested in it on remote
    bases (bodiless here like the outer: the worker's body defines it)."""
    return (
        isinstance(value, RemoteType)
        and value.__qualname__ == f"{namespace.get('__qualname__')}.{name}"
    )


def inner_classes(cls: type) -> List[Tuple[str, type]]:
    """The nested classes on remote bases a class statement on remote bases kept."""
    return [
        (k, v) for k, v in vars(cls).items() if is_inner(k, v, {"__qualname__": cls.__qualname__})
    ]
