"""Standard-library values by structure: what an ordinary program passes, rebuilt on the other
side from its parts (never pickled). Spec: docs/data-plane.md, "Values".

Each kind has a tag, an encoder (the object to its parts) and a decoder (the parts back to an
object). Classes named in a value (a dataclass, a named tuple, an enum) travel by import path;
a side that cannot import a dataclass or named tuple class rebuilds the value as a
``types.SimpleNamespace`` or a named tuple of the same fields, an enum member needs its class.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable, Dict, List, Optional

#: Encode a part (the codec's encode with this side's buffers and references).
Part = Callable[[Any], Any]
#: Decode a part.
Unpart = Callable[[Any], Any]
#: A class by import path on this side, or None (the codec's class resolution).
FindClass = Callable[[str], Optional[type]]

#: Tags of the values this module encodes (the codec dispatches decoding on them).
TAGS = frozenset(
    ("ns", "dc", "nt", "en", "pa", "dt", "td", "dec", "fr", "od", "ctr", "dq", "dd", "rg")
)
_NAMESPACES = ("argparse.Namespace", "types.SimpleNamespace")
_PATHS = ("PurePosixPath", "PureWindowsPath", "PosixPath", "WindowsPath")
_TIMES = ("datetime", "date", "time")


def _loaded(name: str) -> Any:
    """A module only if this process imported it already: a value of one of its types can only
    exist then (so nothing is imported just to look)."""
    return sys.modules.get(name)


def _is(kind: type, path: str) -> bool:
    """``kind`` is that very class (by identity: a stand-in of a remote one only shares its
    name, and is a proxy, not a value)."""
    module, _, name = path.rpartition(".")
    return getattr(_loaded(module), name, None) is kind


def _resolve_std(path: str) -> Any:
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def exception_kind(cls: type) -> Any:
    """0 for a class that is no exception; else its nearest builtin exception's name (what a
    stand-in of it derives from, so ``except RuntimeError`` still catches it)."""
    if not issubclass(cls, BaseException):
        return 0
    for base in cls.__mro__:
        if base.__module__ == "builtins":
            return base.__name__
    return "Exception"


def class_path(cls: type) -> Optional[str]:
    """``module.qualname`` when that path leads back to ``cls`` here, else None."""
    known = cls.__dict__.get("__radium_path__")
    if isinstance(known, str):
        return known
    module, qualname = getattr(cls, "__module__", None), getattr(cls, "__qualname__", "")
    if not isinstance(module, str) or not isinstance(qualname, str) or "<locals>" in qualname:
        return None
    found: Any = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return f"{module}.{qualname}" if found is cls else None


#: Each type's tag (None: not one of these kinds), learned once per type: the checks cost
#: more than a dict lookup, and every argument and result goes through them.
_tags: Dict[type, Optional[str]] = {}
_STDLIB = (
    *(("pa", f"pathlib.{name}") for name in _PATHS),
    *(("dt", f"datetime.{name}") for name in _TIMES),
    ("td", "datetime.timedelta"), ("dec", "decimal.Decimal"), ("fr", "fractions.Fraction"),
    ("od", "collections.OrderedDict"), ("ctr", "collections.Counter"),
    ("dd", "collections.defaultdict"), ("dq", "collections.deque"),
)  # fmt: skip
#: Tags of the standard library's kinds: results of these kinds come back by value.
_PLAIN = frozenset(("rg", "ns", "pa", "dt", "td", "dec", "fr", "od", "ctr", "dd", "dq"))


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
        return "rg"
    if any(_is(kind, path) for path in _NAMESPACES):
        return "ns"
    enum, dataclasses = _loaded("enum"), _loaded("dataclasses")
    if enum is not None and issubclass(kind, enum.Enum):
        return "en"
    if dataclasses is not None and dataclasses.is_dataclass(kind):
        return "dc"
    if issubclass(kind, tuple) and hasattr(kind, "_fields"):
        return "nt"
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
    if tag == "rg":
        return {"$": "rg", "v": [obj.start, obj.stop, obj.step]}
    if tag == "ns":
        return {
            "$": "ns",
            "t": f"{kind.__module__}.{kind.__qualname__}",
            "d": part(dict(vars(obj))),
        }
    if tag == "en":
        return {"$": "en", "t": ship(kind), "n": obj.name}
    if tag == "dc":
        fields = {f.name: getattr(obj, f.name) for f in _loaded("dataclasses").fields(obj)}
        return {"$": "dc", "t": ship(kind), "f": part(fields)}
    if tag == "nt":
        return {"$": "nt", "t": ship(kind), "f": list(kind._fields), "v": [part(v) for v in obj]}
    if tag == "pa":
        return {"$": "pa", "k": kind.__name__, "v": str(obj)}
    if tag == "dt":
        return {"$": "dt", "k": kind.__name__, "v": obj.isoformat()}
    if tag == "td":
        return {"$": "td", "v": [obj.days, obj.seconds, obj.microseconds]}
    if tag == "dec":
        return {"$": "dec", "v": str(obj)}
    if tag == "fr":
        return {"$": "fr", "v": [obj.numerator, obj.denominator]}
    if tag in ("od", "ctr"):
        return {"$": tag, "k": [part(k) for k in obj], "v": [part(v) for v in obj.values()]}
    if tag == "dd":
        return {"$": "dd", "f": part(obj.default_factory), "k": [part(k) for k in obj],
                "v": [part(v) for v in obj.values()]}  # fmt: skip
    return {"$": "dq", "v": [part(v) for v in obj], "m": obj.maxlen}


def plain(obj: Any) -> bool:
    """Whether a result of this kind comes back by value (its parts checked by the caller):
    the standard library's kinds. Dataclasses, named tuples and enums of other modules stay
    remote, as their classes may exist on one side only."""
    return tag_of(type(obj)) in _PLAIN


def _mapping(node: Dict[str, Any], unpart: Unpart) -> List[Any]:
    return list(zip((unpart(k) for k in node["k"]), (unpart(v) for v in node["v"])))


def decode(node: Dict[str, Any], unpart: Unpart, find: FindClass) -> Any:
    """The value of a node with a tag of :data:`TAGS` (ValueError for a malformed one)."""
    tag = node["$"]
    if tag == "ns":
        if node["t"] not in _NAMESPACES:
            raise ValueError(f"unknown namespace type {node['t']!r}")
        fields = unpart(node["d"])
        return _resolve_std(str(node["t"]))(**{str(k): v for k, v in fields.items()})
    if tag in ("en", "dc", "nt"):
        return _record(tag, node, unpart, find)
    if tag == "pa":
        if node["k"] not in _PATHS:
            raise ValueError(f"unknown path type {node['k']!r}")
        return _resolve_std(f"pathlib.{node['k']}")(str(node["v"]))
    if tag == "dt":
        if node["k"] not in _TIMES:
            raise ValueError(f"unknown time type {node['k']!r}")
        return _resolve_std(f"datetime.{node['k']}").fromisoformat(str(node["v"]))
    if tag == "td":
        return _resolve_std("datetime.timedelta")(*(int(x) for x in node["v"]))
    if tag == "rg":
        return range(*(int(x) for x in node["v"]))
    if tag == "dec":
        return _resolve_std("decimal.Decimal")(str(node["v"]))
    if tag == "fr":
        return _resolve_std("fractions.Fraction")(int(node["v"][0]), int(node["v"][1]))
    collections = importlib.import_module("collections")
    if tag == "od":
        return collections.OrderedDict(_mapping(node, unpart))
    if tag == "ctr":
        return collections.Counter(dict(_mapping(node, unpart)))
    if tag == "dd":
        return collections.defaultdict(unpart(node["f"]), _mapping(node, unpart))
    if tag == "dq":
        return collections.deque((unpart(v) for v in node["v"]), node.get("m"))
    raise ValueError(f"unknown value tag {tag!r}")


def _record(tag: str, node: Dict[str, Any], unpart: Unpart, find: FindClass) -> Any:
    """An enum member, a dataclass or a named tuple, of its class when this side has it."""
    cls = find(str(node["t"]))
    if tag == "en":
        enum = importlib.import_module("enum")
        if not (isinstance(cls, type) and issubclass(cls, enum.Enum)):
            raise ValueError(f"enum {node['t']} is not known on this side")
        return getattr(cls, str(node["n"]))
    if tag == "dc":
        fields = unpart(node["f"])
        dataclasses = importlib.import_module("dataclasses")
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
            return importlib.import_module("types").SimpleNamespace(**fields)
        obj: Any = object.__new__(cls)  # as it was: no __init__/__post_init__ run again
        for name, value in fields.items():
            object.__setattr__(obj, name, value)
        return obj
    values = [unpart(v) for v in node["v"]]
    if not (isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")):
        name = str(node["t"]).rpartition(".")[2] or "record"
        cls = importlib.import_module("collections").namedtuple(name, [str(f) for f in node["f"]])
    return cls(*values)
