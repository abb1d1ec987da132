"""Call-site templates on the client: a streamed call of a common shape becomes one small binary
record (docs/data-plane.md, "Batches").

A call's *shape* is its callable (a function's path, or a method's name on a handle) and, per
argument, either a slot kind (a handle, an ``int``, a ``float``: what varies between calls) or a
constant (``None``, a bool, a short string, a remote path or module: ``dtype=torch.float32``
costs nothing per call). The first call of a shape on a connection defines a template (``D``);
every call then is a ``C`` record: the template's id, the result's id and the slot values,
packed by one ``struct`` call. Any other argument (a list, an array, a local object, a value of
another type) makes the call go as JSON, as before.
"""

from __future__ import annotations

import struct
from typing import Any, Dict, List, Optional, Tuple

from radium_interposer import records
from radium_interposer.tags import ATTRIBUTE, HANDLE, MODULE, PATH, SLOT

__all__ = ["MAX_CONSTANT", "PER_SITE", "Templates"]

#: A call site (typed, as calls.py names it) gets at most this many templates: past that its
#: constants vary (a string per call), and its calls go as JSON rather than fill the table.
PER_SITE = 16
#: Strings up to this long are a template's constants; longer ones make the call JSON.
MAX_CONSTANT = 64
_MIN_INT, _MAX_INT = records.INT64


class Templates:
    """One connection's templates (the worker keeps its own copy, per connection)."""

    __slots__ = ("by_key", "last", "per_site", "plans")

    def __init__(self) -> None:
        self.by_key: Dict[Any, Tuple[int, struct.Struct]] = {}
        self.per_site: Dict[str, int] = {}
        #: The template (id, layout) of the last record made: an express plan's (express.py).
        self.last: Optional[Tuple[int, struct.Struct]] = None
        #: The express lane's plans on this connection, by express.key.
        self.plans: Dict[Any, Any] = {}

    def record(
        self,
        function: Dict[str, Any],
        args: Tuple[Any, ...],
        kwargs: Dict[str, Any],
        result: int,
        site: str,
        reference: Any,
        void: bool = False,
    ) -> Optional[bytes]:
        """The call's record (after its template's definition when new), or None when the call
        has another shape and must go as JSON. ``reference(obj)`` is a remote object's tree;
        ``void``: the call returns nothing (its result is not kept, a failure poisons)."""
        key: List[Any] = []
        values: List[Any] = []
        kinds: List[str] = []
        fkey = _function_key(function, values, kinds)
        if fkey is None:
            return None
        for value in (*args, *kwargs.values()) if kwargs else args:
            part = _part(value, values, kinds, reference)
            if part is None:
                return None
            key.append(part)
        full = (fkey, tuple(key), tuple(kwargs) if kwargs else (), void)
        known = self.last = self.by_key.get(full)
        if known is not None:
            return known[1].pack(records.CALL, known[0], result, *values)
        return self._define(full, function, args, kwargs, site, reference, values, kinds, result)

    def _define(
        self,
        full: Any,
        function: Dict[str, Any],
        args: Tuple[Any, ...],
        kwargs: Dict[str, Any],
        site: str,
        reference: Any,
        values: List[Any],
        kinds: List[str],
        result: int,
    ) -> Optional[bytes]:
        count = self.per_site.get(site, 0)
        if count >= PER_SITE or len(self.by_key) >= records.MAX_TEMPLATES:
            return None
        self.per_site[site] = count + 1
        slot = iter(range(len(kinds)))
        tree = function
        if function["$"] == HANDLE:
            tree = _slot(next(slot))
        elif function["$"] == ATTRIBUTE and function["o"]["$"] == HANDLE:
            tree = {"$": ATTRIBUTE, "o": _slot(next(slot)), "n": function["n"]}
        trees = [
            _slot(next(slot)) if part in records.SLOTS else _constant(value, reference)
            for value, part in zip((*args, *kwargs.values()), full[1])
        ]
        slots = "".join(kinds)
        definition: Dict[str, Any] = {"f": tree, "a": trees, "k": list(kwargs), "s": slots}
        if full[3]:
            definition["v"] = 1
        tid = len(self.by_key) + 1
        layout = records.call_struct(slots)
        self.by_key[full] = self.last = (tid, layout)
        return records.define(tid, definition) + layout.pack(records.CALL, tid, result, *values)


def _slot(index: int) -> Dict[str, Any]:
    return {"$": SLOT, "i": index}


def _function_key(function: Dict[str, Any], values: List[Any], kinds: List[str]) -> Any:
    tag = function["$"]
    if tag == PATH:
        return function["p"]
    if tag == HANDLE:  # a remote callable itself (a model, a loss): a slot
        values.append(function["id"])
        kinds.append("h")
        return ("h",)
    if tag == ATTRIBUTE:
        owner = function["o"]
        if owner["$"] == HANDLE:  # a method of a remote object: the object is a slot
            values.append(owner["id"])
            kinds.append("h")
            return ("a", function["n"])
        if owner["$"] == PATH:
            return ("a", owner["p"], function["n"])
    return None


def _part(value: Any, values: List[Any], kinds: List[str], reference: Any) -> Any:
    """The argument's part of the key (its slot kind, or its constant), its slot value added."""
    kind = type(value)
    if kind is int:
        if not _MIN_INT <= value < _MAX_INT:
            return None
        values.append(value)
        kinds.append("i")
        return "i"
    if kind is float:
        values.append(value)
        kinds.append("f")
        return "f"
    if value is None or kind is bool:
        return ("c", value)
    if kind is str:
        return ("s", value) if len(value) <= MAX_CONSTANT else None
    tree = reference(value)
    if tree is None:
        return None
    tag = tree["$"]
    if tag == HANDLE:
        values.append(tree["id"])
        kinds.append("h")
        return "h"
    if tag == PATH:
        return ("p", tree["p"])
    if tag == MODULE:
        return ("m", tree["n"])
    return None


def _constant(value: Any, reference: Any) -> Any:
    if value is None or type(value) in (bool, str):
        return value
    return reference(value)
