"""The client's own library objects, sent to the worker by pickle, and globals that cannot be
sent at all (docs/remoting.md, "Your own library objects"; docs/data-plane.md, tag ``pk``).

A program that has torch itself and remotes only its functions (a split file) passes its own
``torch.device``, tensors, modules and optimizers. The client cannot name them (they are not the
worker's) nor send them by structure, so an instance of an installed library's class (or of the
user's class on such a base) crosses as its pickle, protocol 5, with large buffers (numpy
arrays) out of band; the user's classes and functions inside are shipped and named by their
worker path. One way only: the worker runs the tenant's code anyway, so unpickling the tenant's
bytes there gives it nothing new, while the client never unpickles what the worker sends
(``codec.decode`` refuses the tag unless this process is a worker, :data:`codec.unpickle`;
:mod:`radium_interposer.worker_pickled` loads them there).

The objects of one call are one pickle stream (shared parameters stay shared), and each object
in it keeps a handle on the worker while it lives here: it crosses again as the worker's same
copy, with what the worker did to it. The client's object itself does not change.
"""

from __future__ import annotations

import functools
import io
import os
import pickle
import sys
import threading
import types
import weakref
from typing import Any, Dict, List, Optional, Set, Tuple

from radium_interposer import code_origin, reflection, tensor_sync, upcalls
from radium_interposer.naming import resolve_path
from radium_interposer.tags import HANDLE, PICKLED

__all__ = [
    "GlobalNotSent",
    "is_library_object",
    "placeholders",
    "reference",
    "registered",
    "why_unsent",
]

#: Out-of-band buffers per pickle at most: a frame carries at most 64 buffers (wire limits).
_OOB_MAX = 16
#: Never pickled: functions and methods are named, shipped or called back; files are served.
_NOT_PICKLED = (
    type, types.ModuleType, types.FunctionType, types.MethodType, types.BuiltinFunctionType,
    types.BuiltinMethodType, types.MethodWrapperType, functools.partial, io.IOBase,
)  # fmt: skip


def is_library_object(obj: Any) -> bool:
    """An instance of an installed library's class (torch, numpy, ...), or of the user's class
    on such a base (a ``Net(nn.Module)``, a ``Dataset``): not Radium's, not a function, class,
    module or file, not a plain user class (whose callable instances are called back)."""
    if isinstance(obj, _NOT_PICKLED):
        return False
    installed = code_origin.installed()
    for cls in type(obj).__mro__[:-1]:  # not object
        module_name = str(getattr(cls, "__module__", "") or "")
        if module_name.split(".")[0] in ("radium_interposer", "radium", "builtins"):
            return False
        module = sys.modules.get(module_name)
        if reflection.remote_module(module):
            return False  # a stand-in's: its objects are the worker's (proxies)
        path = getattr(module, "__file__", None)
        if path and str(path).startswith(installed):
            return True
    return False


#: The client's objects the worker has a copy of, by id: (a weak reference, its handle there).
_registry: Dict[int, Tuple[Any, int]] = {}
#: Per thread: the pickle streams of the calls being encoded, by their buffer list's id.
_local = threading.local()


def reference(obj: Any, buffers: List[Any]) -> Optional[Dict[str, Any]]:
    """``obj`` as a node when it is a library object: a handle to the worker's copy when it
    crossed before, else a ``pk`` node (its pickle goes into ``buffers``). None when it is not
    a library object, or it is callable and does not pickle (then it is called back);
    EncodeError naming why when it cannot cross at all."""
    if not is_library_object(obj):
        return None
    handle = registered(obj)
    if handle is not None:
        return {"$": HANDLE, "id": handle}
    stream = _stream(buffers)
    try:
        return stream.add(obj)
    except Exception as exc:
        _local.streams.pop(id(buffers), None)  # its memo may be half written: a new one next
        if callable(obj):
            return None
        from radium_interposer.codec import EncodeError

        kind = type(obj)
        raise EncodeError(
            f"a {kind.__module__}.{kind.__qualname__} cannot cross the data plane: "
            f"pickling it failed ({type(exc).__name__}: {exc})"
        ) from None


def registered(obj: Any) -> Optional[int]:
    """The worker's handle of its copy of ``obj``, if it has one."""
    entry = _registry.get(id(obj))
    return entry[1] if entry is not None and entry[0]() is obj else None


def _stream(buffers: List[Any]) -> _Stream:
    streams: Dict[int, _Stream] = getattr(_local, "streams", None) or {}
    _local.streams = streams
    stream = streams.get(id(buffers))
    if stream is None or stream.buffers is not buffers:
        while len(streams) >= 4:  # encodes nest (a shipped function's globals): a few at once
            streams.pop(next(iter(streams)))
        stream = streams[id(buffers)] = _Stream(buffers)
    return stream


class _Stream:
    """The pickles of one call: one pickler, so one memo, so objects sent together keep what
    they share (a model and its optimizer hold the same parameters)."""

    def __init__(self, buffers: List[Any]) -> None:
        self.buffers, self.data = buffers, bytearray()
        self.index = len(buffers)
        buffers.append(self.data)  # grows with each pickle; sent after the call is encoded
        self.oob: List[int] = []
        self.reg: Dict[str, int] = {}
        self.own: Set[int] = set()
        self.count = 0
        self.pickler = _Pickler(self, protocol=5, buffer_callback=self._buffer)
        self.pickler.stream = self

    def write(self, chunk: Any) -> int:
        self.data += chunk
        return len(chunk)

    def _buffer(self, buffer: pickle.PickleBuffer) -> bool:
        if len(self.oob) >= _OOB_MAX:
            return True  # in band: a frame carries at most 64 buffers
        self.oob.append(len(self.buffers))
        self.buffers.append(buffer.raw())
        return False

    def add(self, obj: Any) -> Dict[str, Any]:
        before = len(self.data)
        try:
            self.pickler.dump(obj)
        except BaseException:
            del self.data[before:]
            raise
        node = {"$": PICKLED, "i": self.index, "n": self.count, "oob": self.oob, "reg": self.reg}
        self.count += 1
        self._register()
        return node

    def _register(self) -> None:
        """Each object the pickles hold gets a handle there, so that it crosses again as the
        worker's same copy (its changes kept), until it dies here."""
        from radium_interposer.client import state

        for idx, obj in self.pickler.memo.copy().values():
            if str(idx) in self.reg or isinstance(obj, _ATOMS) or registered(obj) is not None:
                continue
            handle = state.new_id()
            try:
                ref = weakref.ref(obj, functools.partial(_released, id(obj), handle))
            except TypeError:  # no weak references (a torch.device): pickled each time
                continue
            _registry[id(obj)] = (ref, handle)
            if tensor_sync.is_tensor(obj):
                tensor_sync.track(handle, obj)  # kept equal to the worker's copy at each call
            self.reg[str(idx)] = handle
            self.own.add(handle)


#: Values without identity worth keeping, and what is named rather than pickled.
_ATOMS = (str, bytes, int, float, complex, tuple, frozenset, type, types.FunctionType)


def _released(key: int, handle: int, _ref: Any) -> None:
    """A registered object died here: the worker lets go of its copy (with the next call)."""
    entry = _registry.get(key)
    if entry is None or entry[1] != handle:
        return  # a forked child's inherited copy: its parent's handle, not ours to release
    del _registry[key]
    client = sys.modules.get("radium_interposer.client")  # None at interpreter exit
    if client is not None:
        client.state.releases.append((None, handle))


def _forget() -> None:
    """In a forked child: its objects are its own from now on, sent anew when they cross."""
    _registry.clear()
    tensor_sync.forget()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)


class _Pickler(pickle.Pickler):
    """A pickler that names the user's own classes and functions inside the object (a
    DataLoader's dataset class, a collate function) by their worker path, shipping them
    first: the worker has no ``__main__.SyntheticDigits`` of its own. Objects the worker has a
    copy of already are named by handle (``persistent_id``)."""

    stream: _Stream

    def persistent_id(self, obj: Any) -> Optional[int]:
        handle = registered(obj)
        # One this stream registered is not in the table before the stream is loaded: its memo.
        return handle if handle is not None and handle not in self.stream.own else None

    def reducer_override(self, obj: Any) -> Any:
        if not isinstance(obj, (type, types.FunctionType)):
            return NotImplemented
        path = upcalls.bound.users_path(obj)
        if path is None:
            return NotImplemented  # pickled by name (the worker's error names it)
        return resolve_path, (path,)


class GlobalNotSent(RuntimeError):
    """Shipped code used a global of the client's module that could not be sent."""


def placeholders(unsent: Any) -> Dict[str, Any]:
    """The worker's side: a stand-in for each global the client could not send (meta ``x``:
    name to reason), which raises :class:`GlobalNotSent` with that reason on any use."""
    if unsent is None:
        return {}
    if not isinstance(unsent, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in unsent.items()
    ):
        raise ValueError("ship: x must map names to reasons")
    return {name: _Unsent(why) for name, why in unsent.items()}


def _fail(self: Any, *args: Any, **kwargs: Any) -> Any:
    raise GlobalNotSent(object.__getattribute__(self, "_why"))


class _Unsent:
    """A global that did not reach the worker: any use raises its reason."""

    __slots__ = ("_why",)

    def __init__(self, why: str) -> None:
        object.__setattr__(self, "_why", why)


_USES = (
    "getattribute setattr delattr call getitem setitem delitem iter len bool enter exit repr "
    "str format hash eq ne lt le gt ge contains int float index add sub mul matmul truediv "
    "floordiv mod pow neg pos abs invert radd rsub rmul rmatmul rtruediv"
)
for _dunder in _USES.split():
    setattr(_Unsent, f"__{_dunder}__", _fail)


def why_unsent(module: str, name: str, value: Any, error: BaseException) -> str:
    """The message shipped code gets when it uses a global that could not be sent."""
    kind = type(value)
    hint = (
        " (a function that is not top-level, such as a lambda, is only called back when passed "
        "as an argument)"
        if isinstance(value, types.FunctionType)
        else ""
    )
    return (
        f"global {name!r} of {module} (a {kind.__module__}.{kind.__qualname__}) is used by "
        f"code shipped to the worker but could not be sent: {error}{hint}"
    )
