"""The program's own objects that cross by reference (docs/remoting.md, "Your files and array
objects, passed by reference"): its open file objects and its objects that implement numpy's
protocols (``__array__``, ``__array_function__``, ``__array_ufunc__``), and its iterators (a
generator, a ``map``: "Your iterators").

Such an object stays here, in a table under an id (a fresh one each time it crosses, like a
callback), and the worker gets a stand-in: a file-like object whose methods ask this side to
run them on the very file (``op: "fo"``), or an object whose protocol methods are callbacks of
this object's bound methods, or an iterator whose ``next()`` is a callback of this one's. The
worker lets go of an id as of a callback's (``cbrel``). The
worker can act only on what the program passed, and only through the methods listed here.
"""

from __future__ import annotations

import io
import sys
import threading
from typing import Any, Dict, List, Optional

from radium_interposer import callbacks, pickled, reflection
from radium_interposer.client import state
from radium_interposer.tags import BYTES, CLIENT_OBJECT, PATH
from radium_interposer.worker_objects import OPERATORS, PROTOCOLS

__all__ = ["MAX_READ", "drop", "held", "lookup", "reference", "use_file"]

#: The objects the worker holds, by id.
_held: Dict[int, Any] = {}
#: Those let go of in the latest answer: its value may still name them (the worker's object
#: died as the call returned, and the answer both returns it and lets go of it).
_dropped: Dict[int, Any] = {}
#: Where the latest read-ahead of each file id started (its ``tell()``), to step back to.
_marks: Dict[int, Any] = {}
_lock = threading.Lock()
#: The most one read, read-ahead or line may move (the worker asks for less).
MAX_READ = 64 << 20
_NOT_IMPLEMENTED = {"$": PATH, "p": "builtins.NotImplemented"}


def reference(obj: Any) -> Optional[Dict[str, Any]]:
    """A file object, a protocol object or an iterator as a ``co`` reference; None for anything
    else."""
    if obj is NotImplemented:  # a protocol method's answer: the worker's own NotImplemented
        return _NOT_IMPLEMENTED
    node: Dict[str, Any]
    if type(obj) is getattr(sys.modules.get("tempfile"), "_TemporaryFileWrapper", None):
        obj = obj.file  # NamedTemporaryFile(): the file it wraps
    if isinstance(obj, io.IOBase):
        node = {"$": CLIENT_OBJECT, "f": _describe(obj)}
    else:
        kind = type(obj)
        if pickled.is_library_object(obj):  # an installed library's: by value (pickled)
            return None
        found = _own(kind, PROTOCOLS)
        if found:
            found.update(_own(kind, OPERATORS))
            node = {
                "$": CLIENT_OBJECT,
                "t": reflection.class_path(kind),
                "q": f"{kind.__module__}.{kind.__qualname__}",
                "m": {k: None if v is None else callbacks.reference(getattr(obj, k))
                      for k, v in found.items()},
            }  # fmt: skip
        elif _is_iterator(obj):
            # Iterated by callback, one item a round trip: consumed only as the worker asks,
            # so what it leaves stays for the program (a generator's items need not exist yet).
            node = {"$": CLIENT_OBJECT, "q": f"{kind.__module__}.{kind.__qualname__}",
                    "n": callbacks.reference(obj.__next__)}  # fmt: skip
        else:
            return None
    node["id"] = object_id = state.new_id()
    with _lock:
        _held[object_id] = obj
    return node


def _is_iterator(obj: Any) -> bool:
    """An iterator: its class has ``__next__``, and ``__iter__`` gives the object itself (a
    generator, ``map``, ``zip``, an ``itertools`` object, the program's own iterator class)."""
    kind = type(obj)
    if not hasattr(kind, "__next__") or not hasattr(kind, "__iter__"):
        return False
    try:
        return iter(obj) is obj
    except Exception:  # its __iter__ fails: not one to pass by reference
        return False


def _own(kind: type, names: Any) -> Dict[str, Any]:
    """Which of ``names`` the class or its bases (not ``object``) define, and as what."""
    found: Dict[str, Any] = {}
    for klass in reversed(kind.__mro__[:-1]):  # the nearest definition wins
        found.update((name, klass.__dict__[name]) for name in names if name in klass.__dict__)
    return found


def _describe(handle: io.IOBase) -> Dict[str, Any]:
    """What the worker's file-like object answers without asking: kind, name, mode, state."""

    def ask(method: str) -> bool:
        try:
            return bool(getattr(handle, method)())
        except (ValueError, OSError):  # closed, or a stream that cannot say
            return False

    name, mode = getattr(handle, "name", None), getattr(handle, "mode", None)
    return {
        "text": isinstance(handle, io.TextIOBase),
        "n": name if isinstance(name, (str, int)) else None,
        "mode": mode if isinstance(mode, str) else None,
        "enc": getattr(handle, "encoding", None) if isinstance(handle, io.TextIOBase) else None,
        "r": ask("readable"),
        "w": ask("writable"),
        "s": ask("seekable"),
        "c": bool(handle.closed),
    }


def lookup(object_id: Any) -> Any:
    """The object the worker names by ``object_id`` (one of ours handed back)."""
    with _lock:
        if isinstance(object_id, int) and object_id in _held:
            return _held[object_id]
        if isinstance(object_id, int) and object_id in _dropped:
            return _dropped[object_id]
    raise LookupError(f"unknown client object {object_id!r} (released, or another process's)")


def held() -> bool:
    """Whether the worker holds any of our objects or callables (then calls are not
    pipelined)."""
    return bool(_held) or callbacks.held()


def drop(ids: Any) -> None:
    """The worker no longer holds these objects and callables (they share the ids and their
    release)."""
    global _dropped
    callbacks.drop(ids)
    dropped = {}
    with _lock:
        for object_id in ids if isinstance(ids, list) else []:
            if isinstance(object_id, int) and object_id in _held:
                dropped[object_id] = _held.pop(object_id)
                _marks.pop(object_id, None)
        _dropped = dropped


def _size(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError("file object: sizes must be integers")
    return max(0, min(value, MAX_READ))


def use_file(meta: Dict[str, Any], buffers: List[Any]) -> Any:
    """Run one method of a program's file object for the worker (``op: "fo"``)."""
    object_id, method, args = meta.get("f"), meta.get("m"), meta.get("a", [])
    with _lock:  # only a file the worker still holds (not one it let go of)
        handle = _held.get(object_id) if isinstance(object_id, int) else None
    if handle is None or not isinstance(object_id, int):
        raise LookupError(f"unknown client file {object_id!r} (released, or another process's)")
    if not isinstance(handle, io.IOBase) or not isinstance(args, list):
        raise ValueError(f"client object {object_id!r} is not a file")
    if method == "write":
        if len(args) != 1:
            raise ValueError("file object write: one argument")
        data = args[0]
        if isinstance(data, dict) and data.get("$") == BYTES and data.get("i") == 0 and buffers:
            data = buffers[0]
        elif not isinstance(data, str):
            raise ValueError("file object write: the data must be buffer 0 or a string")
        return handle.write(data)
    if method in ("read", "readline"):
        return getattr(handle, method)(_size(args[0]) if args else MAX_READ)
    if method == "ahead":
        return _ahead(object_id, handle, _size(args[0]) if args else 0)
    if method == "back":
        return _back(object_id, handle, _size(args[0]) if args else 0)
    if method not in ("seek", "tell", "truncate", "flush") or len(args) > 2:
        raise ValueError(f"file object: {method!r} is not a method this side serves")
    if not all(arg is None or (isinstance(arg, int) and not isinstance(arg, bool)) for arg in args):
        raise ValueError(f"file object {method}: arguments must be integers")
    if method in ("seek", "truncate"):  # (a tell keeps the read-ahead: the worker subtracts)
        _marks.pop(object_id, None)
    return getattr(handle, str(method))(*args)


def _ahead(object_id: int, handle: Any, size: int) -> Any:
    """``size`` bytes from the position on (one buffer), or for text whole lines (each at most
    ``size``, ``size`` or a little more in all: the file's own line ends), remembering where
    they started; None when this file cannot step back there."""
    try:
        mark = handle.tell()
    except (OSError, ValueError):
        return None
    if not isinstance(handle, io.TextIOBase):
        _marks[object_id] = mark
        return handle.read(size)
    lines: List[Any] = []
    total = 0
    while total < size:
        line = handle.readline(size)
        if not line:
            break
        lines.append(line)
        total += len(line)
    _marks[object_id] = mark
    return lines


def _back(object_id: int, handle: Any, used: int) -> Any:
    """Back to just after what the worker used of the latest read-ahead."""
    mark = _marks.pop(object_id, None)
    if mark is None:
        raise ValueError("file object: no read-ahead to step back from")
    if isinstance(handle, io.TextIOBase):  # text positions are cookies: re-read what was used
        handle.seek(mark)
        handle.read(used)
        return handle.tell()
    return handle.seek(mark + used)
