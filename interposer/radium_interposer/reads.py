"""What a proxy answers when the program reads it: ``str(x)``, ``len(x)``, ``bool(x)``,
``float(x)``, iteration, an attribute. Each is a call on the worker, unless it is already
known here (:mod:`radium_interposer.known`: metadata, immutable objects) or can be read whole
(:mod:`radium_interposer.iteration`).

:class:`Reads` is the base of :class:`radium_interposer.proxy.Remote`; the proxy module is
looked up when needed (it imports this one).
"""

from __future__ import annotations

import dis
import sys
from typing import Any, Callable, Dict, Optional, Tuple

from radium_interposer import guarded, instructions, iteration, known
from radium_interposer.calls import invoke
from radium_interposer.tags import HANDLE, PATH

__all__ = ["Reads", "answer", "attribute", "call", "metadata", "remote_kind"]

#: Attributes that are always an object of the library's (never None, never a plain value)
#: for these exact types: read as calls, so once one has been a remote object its later reads
#: stream (``p.data`` in a hand-written update). Not ``grad`` or ``grad_fn``: they may be None,
#: and ``p.grad is None`` cannot be answered by a proxy.
_TENSOR_ATTRIBUTES = frozenset(("data", "T", "mT", "H", "mH", "shape", "dtype", "device"))
_STREAMED_ATTRIBUTES = {
    "torch.Tensor": _TENSOR_ATTRIBUTES,
    "torch.nn.parameter.Parameter": _TENSOR_ATTRIBUTES,
    "numpy.ndarray": frozenset(("T",)),  # not dtype: its class follows the array's (Int64DType)
}
#: Attributes that are such an object or None (``p.grad``): read as calls, on a call site of
#: their own, only where the instruction that takes the value uses it in a way None and a
#: remote None share: an operand (``lr * p.grad``, ``p.grad * lr``), an attribute
#: (``p.grad.zero_()``), an item, an argument of a method of ``p``'s own
#: (``p.data.add_(p.grad)``: a remote call) (instructions.instruction).
#: There both raise the same error, on the worker. ``p.grad is None`` and ``g = p.grad`` wait.
_MAYBE_NONE = {
    "torch.Tensor": frozenset(("grad",)),
    "torch.nn.parameter.Parameter": frozenset(("grad",)),
}
_ALIKE_FOR_NONE = frozenset(
    [op for op in dis.opmap if op.startswith(("BINARY_", "INPLACE_", "UNARY_"))]
    + ["LOAD_ATTR", "LOAD_METHOD", instructions.OWN_METHOD]
) - {"UNARY_NOT"}
_GETATTR = {"$": PATH, "p": "builtins.getattr"}
_NEXT = {"$": PATH, "p": "builtins.next"}
_ITER = {"$": PATH, "p": "builtins.iter"}
_GETITEM = {"$": PATH, "p": "operator.getitem"}


def call(name: str, *args: Any, pipeline: bool = False) -> Any:
    """Call the function at path ``name`` on the worker with ``args`` (the first a proxy)."""
    kind = object.__getattribute__(args[0], "_rd_type") if isinstance(args[0], Reads) else ""
    return invoke({"$": PATH, "p": name}, args, {}, f"{kind}|{name}", pipeline)


def attribute(obj: Any, kind: str, ref: Dict[str, Any], name: str) -> Any:
    """``obj.name`` for an attribute that is not a method: known metadata, or asked."""
    if kind in known.TYPES and name in known.ATTRIBUTES and ref["$"] == HANDLE:
        return known.attribute(ref["id"], name, lambda: _read(obj, kind, name), _keepable)
    return _read(obj, kind, name)


def metadata(ref: Dict[str, Any], site: str, args: Tuple[Any, ...], ask: Callable[[], Any]) -> Any:
    """A metadata method's answer (``x.size(0)``, ``x.dim()``: ``ref`` the method, ``site``
    ``<type>.<name>``), known or asked with ``ask``."""
    owner = ref["o"]
    if (
        owner.get("$") != HANDLE
        or site.rpartition(".")[0] not in known.TYPES
        or not all(type(arg) is int for arg in args)
    ):
        return ask()
    return known.attribute(owner["id"], f"{ref['n']}{args}", ask, _keepable)


def _read(obj: Any, kind: str, name: str) -> Any:
    if name in _STREAMED_ATTRIBUTES.get(kind, ()):  # a site of its own per name
        return invoke(_GETATTR, (obj, name), {}, f"{kind}|getattr|{name}")
    if name in _MAYBE_NONE.get(kind, ()):
        use = instructions.attribute_use(guarded.program_frame(), name)
        if use in _ALIKE_FOR_NONE:
            return invoke(_GETATTR, (obj, name), {}, f"{kind}|getattr|{name}|used")
    return call("builtins.getattr", obj, name)


def answer(obj: Any, operation: str, argument: Any, ask: Callable[[], Any]) -> Any:
    """What ``ask`` answers, kept when ``obj`` is an immutable object (known)."""
    ref = object.__getattribute__(obj, "_rd_ref")
    if ref["$"] == HANDLE and known.immutable(object.__getattribute__(obj, "_rd_type")):
        return known.of_immutable(ref["id"], operation, argument, ask)
    return ask()


def _keepable(value: Any) -> bool:
    """Whether metadata read as ``value`` may be kept: a plain value or an immutable object."""
    if isinstance(value, Reads):
        return known.immutable(object.__getattribute__(value, "_rd_type"))
    return type(value) in (int, bool, str, float, type(None)) or (
        type(value) is tuple and all(type(item) is int for item in value)
    )


def remote_kind(obj: Any) -> Optional[str]:
    """A value's remote type for known.harmless: None for a local value, ``known.LIBRARY``
    for a library's object named by path (``torch.float32``)."""
    if not isinstance(obj, Reads):
        return None
    ref = object.__getattribute__(obj, "_rd_ref")
    if ref["$"] == PATH and str(ref.get("p", "")).startswith(("torch.", "numpy.")):
        return known.LIBRARY
    return object.__getattribute__(obj, "_rd_type")  # type: ignore[no-any-return]


class Reads:
    """The reads of a proxy's value (a base of ``proxy.Remote``, which has the slots)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str(answer(self, "repr", None, lambda: call("builtins.repr", self)))

    def __str__(self) -> str:
        return str(answer(self, "str", None, lambda: call("builtins.str", self)))

    def __format__(self, spec: str) -> str:
        return str(answer(self, "format", spec, lambda: call("builtins.format", self, spec)))

    def __bool__(self) -> bool:
        return bool(call("builtins.bool", self))

    def __len__(self) -> int:
        ref = object.__getattribute__(self, "_rd_ref")
        ask = lambda: int(call("builtins.len", self))  # noqa: E731
        if object.__getattribute__(self, "_rd_type") in known.TYPES and ref["$"] == HANDLE:
            return int(known.attribute(ref["id"], "len", ask, _keepable))
        return int(answer(self, "len", None, ask))

    def __hash__(self) -> int:
        return int(answer(self, "hash", None, lambda: call("builtins.hash", self)))

    def __int__(self) -> int:
        return int(call("builtins.int", self))

    def __float__(self) -> float:
        return float(call("builtins.float", self))

    def __complex__(self) -> complex:
        return complex(call("builtins.complex", self))

    def __index__(self) -> int:
        return int(call("operator.index", self))

    def __iter__(self) -> Any:
        kind = object.__getattribute__(self, "_rd_type")
        if iteration.whole(kind, sys._getframe(1)):
            proxy = sys.modules["radium_interposer.proxy"]
            ref = object.__getattribute__(self, "_rd_ref")
            kept = iteration.kept(ref) if known.answers else None
            if kept is not None:  # they came with the next() that made it
                return iter(kept)
            ask = lambda: iteration.items(ref, proxy.request, proxy.decode)  # noqa: E731
            whole = answer(self, "items", None, ask)
            if whole is not None:
                return iter(whole)
        walks = kind == "builtins.generator"  # ``model.parameters()``: its items may come along
        it = invoke(_ITER, (self,), {}, f"{kind}|builtins.iter", False, items=walks)
        walked = (
            iteration.kept(object.__getattribute__(it, "_rd_ref"), take=True) if walks else None
        )
        return it if walked is None else iter(walked)

    def __next__(self) -> Any:
        # ``for x, y in loader``: the item's items come with it (iteration.unpacks_next)
        items = iteration.unpacks_next(sys._getframe(1))
        kind = object.__getattribute__(self, "_rd_type")
        return invoke(_NEXT, (self,), {}, f"{kind}|builtins.next", False, items=items)

    def __getitem__(self, key: Any) -> Any:
        kind = object.__getattribute__(self, "_rd_type")
        ask = lambda: invoke(_GETITEM, (self, key), {}, f"{kind}|getitem|0")  # noqa: E731
        return answer(self, "getitem", key, ask)  # ``x.shape[0]``: known

    def __contains__(self, item: Any) -> bool:
        return bool(call("operator.contains", self, item))
