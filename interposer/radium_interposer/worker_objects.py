"""The worker's side of the client program's objects passed by reference (``co``; semantics in
docs/remoting.md, "Your files and array objects, passed by reference").

A file object of the program becomes a :mod:`client_streams` file; an object of the program
that implements numpy's protocols becomes an instance of a stand-in class with the same
protocol methods, each a callback of the program's object, so numpy here dispatches to it as
numpy there would; an iterator of the program becomes a :class:`ClientIterator`. All go back
to the client as the program's own object, and their ids are let go of (``cbrel``) when they
die here. Functions the worker passes to such a method
(``numpy.concatenate``) go by path, so the program sees its own remoted ``np.concatenate``.
"""

from __future__ import annotations

import functools
import itertools
import os
import sys
import threading
import types
from typing import Any, Callable, Dict, List, Optional, Tuple

from radium_interposer import codec, iteration
from radium_interposer.client_file_objects import ClientBinaryFile, ClientTextFile
from radium_interposer.client_streams import settle
from radium_interposer.naming import resolve_path
from radium_interposer.tags import CLIENT_OBJECT, DICT, PATH, TUPLE

__all__ = [
    "adapt",
    "back_reference",
    "drain",
    "items",
    "outgoing",
    "path_reference",
    "resolve",
    "settle",
]
PROTOCOLS = ("__array__", "__array_function__", "__array_ufunc__")
_BINARY = "add sub mul matmul truediv floordiv mod pow lshift rshift and or xor".split()  # noqa: SIM905
#: Operators the stand-in forwards when the program's class defines them: numpy defers to them
#: (``__array_ufunc__ = None``, object arrays).
OPERATORS = (
    *(f"__{op}__" for op in _BINARY),
    *(f"__r{op}__" for op in _BINARY),
    *(f"__{op}__" for op in "neg pos abs invert lt le eq ne gt ge".split()),  # noqa: SIM905
)
METHODS = frozenset((*PROTOCOLS, *OPERATORS))
#: The kinds of functions that may go by path (a function of the program's own has no path).
_FUNCTIONS = (types.FunctionType, types.BuiltinFunctionType)
_NUMPY = ("ufunc", "_ArrayFunctionDispatcher")
_classes: Dict[Tuple[Any, ...], type] = {}
_lock = threading.Lock()


class ClientObject:
    """An object of the client program on the worker; its stand-in class adds the protocol
    methods the program's class has, each calling the program's object back."""

    __slots__ = ("__weakref__", "_rd_id", "_rd_methods", "_rd_release")
    _rd_id: int
    _rd_methods: Dict[str, Any]
    _rd_release: Callable[[int], None]

    def __repr__(self) -> str:
        kind = type(self)
        return f"<client object {kind.__module__}.{kind.__qualname__}>"

    def __del__(self) -> None:
        self._rd_release(self._rd_id)


class ClientIterator:
    """An iterator of the client program (a generator, a ``map``): ``next()`` calls the
    program's ``next()`` back, and its StopIteration ends the iteration here. No
    ``__getitem__`` nor ``__len__``: numpy tells it from a sequence as it does a generator."""

    __slots__ = ("__weakref__", "_rd_id", "_rd_name", "_rd_next", "_rd_release")
    _rd_id: int
    _rd_next: Callable[[], Any]
    _rd_name: str
    _rd_release: Callable[[int], None]

    def __iter__(self) -> ClientIterator:
        return self

    def __next__(self) -> Any:
        return self._rd_next()

    def __repr__(self) -> str:
        return f"<client iterator {self._rd_name}>"

    def __del__(self) -> None:
        self._rd_release(self._rd_id)


def _forward(name: str) -> Callable[..., Any]:
    def method(self: ClientObject, *args: Any, **kwargs: Any) -> Any:
        return self._rd_methods[name](*args, **kwargs)  # a callback: it settles the files

    method.__name__ = method.__qualname__ = name
    return method


def _stand_in_class(node: Dict[str, Any]) -> type:
    """The stand-in class of the program's class: its name and path, and its protocols."""
    path, qualified, methods = node.get("t"), str(node.get("q") or "client.object"), node["m"]
    key = (path, qualified, tuple(sorted((k, v is None) for k, v in methods.items())))
    with _lock:
        known = _classes.get(key)
        if known is None:
            module, _, qualname = qualified.rpartition(".")
            namespace: Dict[str, Any] = {"__module__": module, "__qualname__": qualname}
            namespace["__slots__"] = ()
            if isinstance(path, str):  # names the program's class when it crosses back
                namespace["__radium_path__"] = path
            for name, method in methods.items():
                namespace[name] = None if method is None else _forward(name)
            known = _classes[key] = type(qualname.rpartition(".")[2], (ClientObject,), namespace)
    return known


def resolve(node: Dict[str, Any], resolve_reference: Callable[[Any], Any], session: Any) -> Any:
    """The worker's object for a ``co`` node: a client file, or a protocol stand-in."""
    object_id = node.get("id")
    if not isinstance(object_id, int) or session is None:
        raise ValueError("a client object needs an integer id, in a call")

    def release(object_id: int) -> None:
        session.dropped.append(object_id)

    about = node.get("f")
    if isinstance(about, dict):
        kind = ClientTextFile if about.get("text") else ClientBinaryFile
        return kind(object_id, about, release)
    if "n" in node:  # an iterator: each next() a callback of the program's own
        iterator: ClientIterator = object.__new__(ClientIterator)
        iterator._rd_id, iterator._rd_release = object_id, release
        iterator._rd_next, iterator._rd_name = resolve_reference(node["n"]), str(node.get("q"))
        return iterator
    methods = node.get("m")
    if not isinstance(methods, dict) or not set(methods) <= METHODS:
        raise ValueError("a client object is a file or has numpy protocol methods")
    resolved = {k: None if v is None else resolve_reference(v) for k, v in methods.items()}
    obj: ClientObject = object.__new__(_stand_in_class({**node, "m": resolved}))
    obj._rd_id, obj._rd_methods, obj._rd_release = object_id, resolved, release
    return obj


def back_reference(obj: Any) -> Optional[Dict[str, Any]]:
    """The program's own object, for one of these going back to the client; else None."""
    if isinstance(obj, (ClientObject, ClientIterator)):
        return {"$": CLIENT_OBJECT, "id": obj._rd_id}
    if isinstance(obj, (ClientBinaryFile, ClientTextFile)):
        return {"$": CLIENT_OBJECT, "id": obj._id}
    return None


def path_reference(obj: Any) -> Optional[Dict[str, Any]]:
    """A function of an importable module by its path (``numpy.concatenate``, ``numpy.add``)
    when that path leads back to it; a client object as itself; else None."""
    back = back_reference(obj)
    function = isinstance(obj, _FUNCTIONS) or type(obj).__name__ in _NUMPY
    if back is not None or not function:
        return back
    module = getattr(obj, "__module__", None)
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if not isinstance(module, str) or not isinstance(name, str) or "<" in name:
        return None
    path = f"{module}.{name}"
    try:
        found = resolve_path(path)
    except Exception:  # not importable by that path: a handle, as before
        return None
    return {"$": PATH, "p": path} if found is obj else None


def outgoing(obj: Any, buffers: List[Any], refer: Callable[[Any], Any]) -> Any:
    """A callback's argument: plain values by value, containers by structure, the rest left
    remote as handles (``refer``, as results cross)."""
    if codec.is_plain(obj):
        return codec.encode(obj, buffers, lambda _: None)
    kind = type(obj)
    if kind is list:
        return [outgoing(item, buffers, refer) for item in obj]
    if kind is tuple:
        return {"$": TUPLE, "v": [outgoing(item, buffers, refer) for item in obj]}
    if kind is dict:
        keys = [outgoing(key, buffers, refer) for key in obj]
        return {"$": DICT, "k": keys, "v": [outgoing(v, buffers, refer) for v in obj.values()]}
    return path_reference(obj) or refer(obj)


def adapt(function: Any, args: Any) -> Any:
    """``ndarray.tofile`` given a client file object writes through it (it wants a descriptor,
    which a client file has none of here); anything else unchanged."""
    if getattr(function, "__name__", None) != "tofile" or not args:
        return function
    if not isinstance(args[0], (ClientBinaryFile, ClientTextFile)):
        return function
    np = sys.modules.get("numpy")
    owner = getattr(function, "__self__", None)
    if np is None or not isinstance(owner, np.ndarray):
        return function
    from radium_interposer.client_arrays import tofile

    return functools.partial(tofile, owner)


def items(obj: Any, node: Callable[[Any], Any]) -> Optional[List[Any]]:
    """The items of a list or tuple (or a subclass iterated as one is: torch.Size, named
    tuples) of at most MAX_ITEMS, each as ``node`` gives it (as next() on its iterator would:
    ``items`` and a ``next`` the program unpacks); None for anything else."""
    kind = type(obj)
    iterated = kind.__iter__ in (list.__iter__, tuple.__iter__) and isinstance(obj, (list, tuple))
    if not iterated or len(obj) > iteration.MAX_ITEMS:
        return None
    return [node(item) for item in obj]


#: Generators of library code that only walk a structure: a module's parameters, buffers,
#: children. A loop over a fresh one gets its items with its ``iter`` (``ni``), not one ``next``
#: each: nothing of the program's runs while they are read, so reading them first gives the
#: same items (docs/data-plane.md, ``call``).
_WALKS = frozenset(
    f"Module.{name}"
    for name in ("parameters", "named_parameters", "buffers", "named_buffers", "children",
                 "named_children", "modules", "named_modules")
)  # fmt: skip
_WALKS_FILE = os.path.join("torch", "nn", "modules", "module.py")


def drain(obj: Any) -> Tuple[Any, Optional[List[Any]]]:
    """``obj``, and its items when it is a fresh generator of _WALKS with at most MAX_ITEMS
    (then it is spent, as the loop leaves it); with more, what stands for it (the items read,
    then the rest of it) and None; anything else as it is, and None."""
    if not isinstance(obj, types.GeneratorType):
        return obj, None
    import inspect  # here: it costs every remoted Python's start milliseconds

    code = obj.gi_code
    if (
        getattr(code, "co_qualname", None) not in _WALKS  # 3.11+: older Pythons iterate
        or not code.co_filename.endswith(_WALKS_FILE)
        or inspect.getgeneratorstate(obj) != inspect.GEN_CREATED
    ):
        return obj, None
    taken = list(itertools.islice(obj, iteration.MAX_ITEMS + 1))
    if len(taken) > iteration.MAX_ITEMS:
        return itertools.chain(taken, obj), None
    return obj, taken
