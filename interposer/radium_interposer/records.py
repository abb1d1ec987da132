"""The records of a binary batch (data-plane version 2): call-site templates defined once,
then calls that name a template and carry only their varying arguments. Spec:
docs/data-plane.md, "Batches". Stdlib only: both sides use it.

A body is a sequence of records, each starting with a kind byte:

- ``D`` tid u32, n u32, n bytes of JSON: a template (what is constant in a call site's calls);
- ``C`` tid u32, r i64, then the template's slots: a call whose result stays remote as ``r``;
- ``L`` n u32, n i64: handles released, after the records before it ran.

All integers little-endian. :func:`parse` checks a whole body before anything in it runs.
"""

from __future__ import annotations

import json
import struct
from typing import Any, Dict, List, Tuple

from radium_interposer.tags import ATTRIBUTE, SLOT

__all__ = [
    "INT64",
    "MAX_DEFINITION",
    "MAX_RELEASES",
    "MAX_TEMPLATES",
    "SLOTS",
    "Reader",
    "Record",
    "RecordError",
    "call_struct",
    "define",
    "is_slot",
    "release",
]

DEFINE, CALL, RELEASE = b"D"[0], b"C"[0], b"L"[0]
#: Slot kinds and their struct formats: a handle id, an int, a float (all 8 bytes).
SLOTS = {"h": "q", "i": "q", "f": "d"}
#: A slot in a template's trees (its index into the call's slot values).
#: At most this many templates per connection, of definitions at most this long.
MAX_TEMPLATES = 65536
MAX_DEFINITION = 64 << 10
#: At most this many releases in one record.
MAX_RELEASES = 1 << 20

_DEFINE = struct.Struct("<BII")
_CALL_HEAD = struct.Struct("<BI")
_RELEASE = struct.Struct("<BI")
_ID = struct.Struct("<q")
INT64 = (-(1 << 63), 1 << 63)


class RecordError(ValueError):
    """A batch body that breaks the format: the stream is out of step, the connection closes."""


def call_struct(slots: str) -> struct.Struct:
    """The layout of a ``C`` record of a template with these slot kinds."""
    return struct.Struct("<BIq" + "".join(SLOTS[kind] for kind in slots))


def define(tid: int, definition: Dict[str, Any]) -> bytes:
    """A ``D`` record."""
    data = json.dumps(definition, separators=(",", ":")).encode("utf-8")
    return _DEFINE.pack(DEFINE, tid, len(data)) + data


def release(ids: List[int]) -> bytes:
    """An ``L`` record."""
    return _RELEASE.pack(RELEASE, len(ids)) + struct.pack(f"<{len(ids)}q", *ids)


#: ("C", tid, r, slot values), ("D", tid, definition) or ("L", ids).
Record = Tuple[Any, ...]


class Reader:
    """One connection's side of the templates: each ``D`` compiled (by ``compile``) and kept,
    so later ``C`` records are read with the template's own struct."""

    def __init__(self) -> None:
        self.layouts: Dict[int, struct.Struct] = {}

    def parse(self, body: bytes) -> List[Record]:
        """Every record of ``body``, checked whole: nothing runs from a body that breaks."""
        records: List[Record] = []
        view, pos, end = memoryview(body), 0, len(body)
        try:
            while pos < end:
                kind = body[pos]
                if kind == CALL:
                    _, tid = _CALL_HEAD.unpack_from(view, pos)
                    layout = self.layouts.get(tid)
                    if layout is None:
                        raise RecordError(f"a call names template {tid}, never defined")
                    values = layout.unpack_from(view, pos)
                    records.append(("C", tid, values[2], values[3:]))
                    pos += layout.size
                elif kind == DEFINE:
                    _, tid, size = _DEFINE.unpack_from(view, pos)
                    pos += _DEFINE.size
                    if size > MAX_DEFINITION or pos + size > end:
                        raise RecordError(f"template {tid}'s definition of {size} bytes")
                    definition = _definition(tid, bytes(view[pos : pos + size]))
                    self._learn(tid, definition)
                    records.append(("D", tid, definition))
                    pos += size
                elif kind == RELEASE:
                    _, count = _RELEASE.unpack_from(view, pos)
                    pos += _RELEASE.size
                    if count > MAX_RELEASES or pos + 8 * count > end:
                        raise RecordError(f"a release of {count} handles past the body's end")
                    records.append(("L", list(struct.unpack_from(f"<{count}q", view, pos))))
                    pos += 8 * count
                else:
                    raise RecordError(f"unknown record kind {kind}")
        except struct.error:
            raise RecordError("a record runs past the end of its batch") from None
        return records

    def _learn(self, tid: int, definition: Dict[str, Any]) -> None:
        if tid in self.layouts:
            raise RecordError(f"template {tid} is defined twice")
        if len(self.layouts) >= MAX_TEMPLATES:
            raise RecordError(f"more than {MAX_TEMPLATES} templates on one connection")
        self.layouts[tid] = call_struct(definition["s"])


def _definition(tid: int, data: bytes) -> Dict[str, Any]:
    """A template's JSON, checked: ``f`` a tree, ``a`` a list of trees, ``k`` keyword names
    (their trees last in ``a``), ``s`` the slot kinds, ``v`` 1 when its calls return nothing;
    each slot used exactly once, at the top of an argument, a keyword value, the callable itself
    or a method's object (``f`` = ``{"$": "a", "o": slot}``)."""
    try:
        definition = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise RecordError(f"template {tid} is not JSON") from None
    if not isinstance(definition, dict):
        raise RecordError(f"template {tid} is not a JSON object")
    slots, args, names = definition.get("s"), definition.get("a"), definition.get("k", [])
    if not isinstance(slots, str) or any(kind not in SLOTS for kind in slots):
        raise RecordError(f"template {tid} has slot kinds {slots!r}")
    if not isinstance(args, list) or not isinstance(names, list):
        raise RecordError(f"template {tid} needs a list of arguments and of keyword names")
    if len(names) > len(args) or not all(isinstance(name, str) for name in names):
        raise RecordError(f"template {tid} has keyword names {names!r}")
    if definition.get("v", 0) not in (0, 1):
        raise RecordError(f"template {tid} has v {definition.get('v')!r}")
    function = definition.get("f")
    owner = (
        function.get("o") if isinstance(function, dict) and function.get("$") == ATTRIBUTE else None
    )
    tops = [function if is_slot(function) else owner, *args]
    used = sorted(top["i"] for top in tops if is_slot(top))
    if used != list(range(len(slots))):
        raise RecordError(f"template {tid} does not use each of its {len(slots)} slots once")
    return definition


def is_slot(tree: Any) -> bool:
    """Whether a template's tree is a slot (``{"$": "_", "i": n}``)."""
    return (
        type(tree) is dict
        and tree.get("$") == SLOT
        and type(tree.get("i")) is int
        and len(tree) == 2
    )
