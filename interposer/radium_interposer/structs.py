"""Standard-library values by structure: what an ordinary program passes, rebuilt on the other
side from its parts (never pickled). Spec: docs/data-plane.md, "Values".

Each kind has a tag, an encoder (the object to its parts) and a decoder (the parts back to an
object). Classes named in a value (a dataclass, a named tuple, an enum) travel by import path;
a side that does not have a dataclass or named tuple class rebuilds the value as a
``types.SimpleNamespace`` or a named tuple of the same fields, an enum member needs its class.
Which classes a side has is the decoder's ``find``: a client looks only at modules it already
imported (a worker never makes it import code), a worker may import what its client names.
"""

from __future__ import annotations

import collections
import enum
import sys
import types
from typing import Any, Callable, Dict, List, Optional

from radium_interposer import tags

__all__ = [
    "MAX_FIELDS",
    "PRELOADED",
    "TAGS",
    "DecodeError",
    "FindClass",
    "Part",
    "Unpart",
    "decode",
    "encode",
    "plain",
    "preload",
    "tag_of",
]

#: Encode a part (the codec's encode with this side's buffers and references).
Part = Callable[[Any], Any]
#: Decode a part.
Unpart = Callable[[Any], Any]
#: A class by import path on this side, or None (the codec's class resolution).
FindClass = Callable[[str], Optional[type]]

#: Tags of the values this module encodes (the codec dispatches decoding on them).
TAGS = frozenset(
    (tags.NAMESPACE, tags.DATACLASS, tags.NAMEDTUPLE, tags.ENUM, tags.PURE_PATH, tags.DATETIME,
     tags.TIMEDELTA, tags.DECIMAL, tags.FRACTION, tags.ORDERED_DICT, tags.COUNTER, tags.DEQUE,
     tags.DEFAULTDICT, tags.RANGE)
)  # fmt: skip
_NAMESPACES = ("argparse.Namespace", "types.SimpleNamespace")
_PATHS = ("PurePosixPath", "PureWindowsPath", "PosixPath", "WindowsPath")
_TIMES = ("datetime", "date", "time")
#: The most fields of a named tuple rebuilt without its class (one is made for it).
MAX_FIELDS = 4096
#: The standard library modules whose values a client rebuilds: imported by :func:`preload`
#: before a worker can say anything, so that none is ever imported on a worker's word (one
#: planted in the program's directory through its file service would run). ``argparse``
#: is not: a Namespace reaching a program that never imported it is a SimpleNamespace.
PRELOADED = ("pathlib", "datetime", "decimal", "fractions")


class DecodeError(ValueError):
    """A value from the other side that this side will not or cannot rebuild: malformed, or
    naming code (a module, a class) this side would have to import."""


def preload() -> None:
    """Import the modules of :data:`PRELOADED` (a client calls it before its first connection:
    fixed names, not the worker's; a few milliseconds once per process)."""
    for name in PRELOADED:
        if name not in sys.modules:
            __import__(name)


def _loaded(name: str) -> Any:
    """A module only if this process imported it already: a value of one of its types can only
    exist then (so nothing is imported just to look)."""
    return sys.modules.get(name)


def _is(kind: type, path: str) -> bool:
    """``kind`` is that very class (by identity: a stand-in of a remote one only shares its
    name, and is a proxy, not a value)."""
    module, _, name = path.rpartition(".")
    return getattr(_loaded(module), name, None) is kind


#: Each type's tag (None: not one of these kinds), learned once per type: the checks cost
#: more than a dict lookup, and every argument and result goes through them.
_tags: Dict[type, Optional[str]] = {}
_STDLIB = (
    *((tags.PURE_PATH, f"pathlib.{name}") for name in _PATHS),
    *((tags.DATETIME, f"datetime.{name}") for name in _TIMES),
    (tags.TIMEDELTA, "datetime.timedelta"), (tags.DECIMAL, "decimal.Decimal"),
    (tags.FRACTION, "fractions.Fraction"),
    (tags.ORDERED_DICT, "collections.OrderedDict"), (tags.COUNTER, "collections.Counter"),
    (tags.DEFAULTDICT, "collections.defaultdict"), (tags.DEQUE, "collections.deque"),
)  # fmt: skip
#: Tags of the standard library's kinds: results of these kinds come back by value.
_PLAIN = TAGS - {tags.ENUM, tags.DATACLASS, tags.NAMEDTUPLE}  # not of a class of the program's


def tag_of(kind: type) -> Optional[str]:
    """The tag values of type ``kind`` cross with, or None."""
    try:
        return _tags[kind]
    except KeyError:
        pass
    tag = _classify(kind)
    if len(_tags) > 4096:  # classes made on the fly (named tuples per call): keep it bounded
        _tags.clear()
    _tags[kind] = tag
    return tag


def _classify(kind: type) -> Optional[str]:
    if kind is range:
        return tags.RANGE
    if any(_is(kind, path) for path in _NAMESPACES):
        return tags.NAMESPACE
    enum, dataclasses = _loaded("enum"), _loaded("dataclasses")
    if enum is not None and issubclass(kind, enum.Enum):
        return tags.ENUM
    if dataclasses is not None and dataclasses.is_dataclass(kind):
        return tags.DATACLASS
    if issubclass(kind, tuple) and hasattr(kind, "_fields"):
        return tags.NAMEDTUPLE
    for tag, path in _STDLIB:
        if _is(kind, path):
            return tag
    return None


def encode(obj: Any, part: Part, ship: Callable[[type], Optional[str]]) -> Optional[Dict[str, Any]]:
    """``obj`` as a tagged node, or None when it is none of these kinds. ``ship(cls)`` gives the
    path the other side knows a class by (shipping it there first when it must)."""
    kind = type(obj)
    tag = tag_of(kind)
    if tag is None:
        return None
    if tag == tags.RANGE:
        return {"$": tags.RANGE, "v": [obj.start, obj.stop, obj.step]}
    if tag == tags.NAMESPACE:
        return {
            "$": tags.NAMESPACE,
            "t": f"{kind.__module__}.{kind.__qualname__}",
            "d": part(dict(vars(obj))),
        }
    if tag == tags.ENUM:
        return {"$": tags.ENUM, "t": ship(kind), "n": obj.name}
    if tag == tags.DATACLASS:
        fields = {f.name: getattr(obj, f.name) for f in _loaded("dataclasses").fields(obj)}
        return {"$": tags.DATACLASS, "t": ship(kind), "f": part(fields)}
    if tag == tags.NAMEDTUPLE:
        return {
            "$": tags.NAMEDTUPLE,
            "t": ship(kind),
            "f": list(kind._fields),
            "v": [part(v) for v in obj],
        }
    if tag == tags.PURE_PATH:
        return {"$": tags.PURE_PATH, "k": kind.__name__, "v": str(obj)}
    if tag == tags.DATETIME:
        return {"$": tags.DATETIME, "k": kind.__name__, "v": obj.isoformat()}
    if tag == tags.TIMEDELTA:
        return {"$": tags.TIMEDELTA, "v": [obj.days, obj.seconds, obj.microseconds]}
    if tag == tags.DECIMAL:
        return {"$": tags.DECIMAL, "v": str(obj)}
    if tag == tags.FRACTION:
        return {"$": tags.FRACTION, "v": [obj.numerator, obj.denominator]}
    if tag in (tags.ORDERED_DICT, tags.COUNTER):
        return {"$": tag, "k": [part(k) for k in obj], "v": [part(v) for v in obj.values()]}
    if tag == tags.DEFAULTDICT:
        return {"$": tags.DEFAULTDICT, "f": part(obj.default_factory), "k": [part(k) for k in obj],
                "v": [part(v) for v in obj.values()]}  # fmt: skip
    return {"$": tags.DEQUE, "v": [part(v) for v in obj], "m": obj.maxlen}


def plain(obj: Any) -> bool:
    """Whether a result of this kind comes back by value (its parts checked by the caller):
    the standard library's kinds. Dataclasses, named tuples and enums of other modules stay
    remote, as their classes may exist on one side only."""
    return tag_of(type(obj)) in _PLAIN


def _mapping(node: Dict[str, Any], unpart: Unpart) -> List[Any]:
    return list(zip((unpart(k) for k in node["k"]), (unpart(v) for v in node["v"])))


def decode(node: Dict[str, Any], unpart: Unpart, find: FindClass) -> Any:
    """The value of a node with a tag of :data:`TAGS` (DecodeError, a ValueError, for one that
    is malformed or that this side will not rebuild)."""
    tag = node["$"]
    if tag in (tags.ENUM, tags.DATACLASS, tags.NAMEDTUPLE):
        return _record(tag, node, unpart, find)
    if tag == tags.NAMESPACE:
        if node["t"] not in _NAMESPACES:
            raise DecodeError(f"unknown namespace type {node['t']!r}")
        fields = unpart(node["d"])
        # argparse not imported here: the same attributes, as a SimpleNamespace.
        kind = find(str(node["t"])) or types.SimpleNamespace
        return kind(**{str(k): v for k, v in fields.items()})
    if tag == tags.PURE_PATH:
        if node["k"] not in _PATHS:
            raise DecodeError(f"unknown path type {node['k']!r}")
        return _standard(find, f"pathlib.{node['k']}")(str(node["v"]))
    if tag == tags.DATETIME:
        if node["k"] not in _TIMES:
            raise DecodeError(f"unknown time type {node['k']!r}")
        return _standard(find, f"datetime.{node['k']}").fromisoformat(str(node["v"]))
    if tag == tags.TIMEDELTA:
        return _standard(find, "datetime.timedelta")(*(int(x) for x in node["v"]))
    if tag == tags.RANGE:
        return range(*(int(x) for x in node["v"]))
    if tag == tags.DECIMAL:
        return _standard(find, "decimal.Decimal")(str(node["v"]))
    if tag == tags.FRACTION:
        return _standard(find, "fractions.Fraction")(int(node["v"][0]), int(node["v"][1]))
    if tag == tags.ORDERED_DICT:
        return collections.OrderedDict(_mapping(node, unpart))
    if tag == tags.COUNTER:
        return collections.Counter(dict(_mapping(node, unpart)))
    if tag == tags.DEFAULTDICT:
        return collections.defaultdict(unpart(node["f"]), _mapping(node, unpart))
    if tag == tags.DEQUE:
        return collections.deque((unpart(v) for v in node["v"]), node.get("m"))
    raise DecodeError(f"unknown value tag {tag!r}")


def _standard(find: FindClass, path: str) -> Any:
    """A standard library class (a client has its module: :func:`preload`)."""
    cls = find(path)
    if cls is None:
        module = path.rpartition(".")[0]
        raise DecodeError(f"a {path} value arrived, but this process has not imported {module}")
    return cls


def _record(tag: str, node: Dict[str, Any], unpart: Unpart, find: FindClass) -> Any:
    """An enum member, a dataclass or a named tuple, of its class when this side has it."""
    cls = find(str(node["t"]))
    if tag == tags.ENUM:
        if not (isinstance(cls, type) and issubclass(cls, enum.Enum)):
            raise DecodeError(
                f"enum {node['t']} is not known on this side (its module is not imported here)"
            )
        member = cls.__members__.get(str(node["n"]))
        if member is None:
            raise DecodeError(f"enum {node['t']} has no member {node['n']!r}")
        return member
    if tag == tags.DATACLASS:
        fields = unpart(node["f"])
        dataclasses = sys.modules.get("dataclasses")  # not imported: no class is a dataclass
        if dataclasses is None or not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
            return types.SimpleNamespace(**fields)
        obj: Any = object.__new__(cls)  # as it was: no __init__/__post_init__ run again
        for name, value in fields.items():
            object.__setattr__(obj, name, value)
        return obj
    values = [unpart(v) for v in node["v"]]
    kind: Any = cls
    if not (isinstance(cls, type) and issubclass(cls, tuple) and _named_tuple(cls)):
        name = str(node["t"]).rpartition(".")[2] or "record"
        if len(node["f"]) > MAX_FIELDS:  # its class is compiled: ~2 KiB and 15 µs a field
            raise DecodeError(f"a named tuple of {len(node['f'])} fields (at most {MAX_FIELDS})")
        make: Callable[..., Any] = collections.namedtuple
        kind = make(name, [str(f) for f in node["f"]])
    return kind(*values)


def _named_tuple(cls: type) -> bool:
    """Whether a tuple class has ``_fields``, looked up without running a metaclass hook."""
    return any("_fields" in vars(base) for base in cls.__mro__)
