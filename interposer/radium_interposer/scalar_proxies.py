"""Proxies of remote numpy scalars, on a client without numpy (docs/remoting.md, "numpy
scalars"; the worker's side is :mod:`radium_interposer.scalars`).

Such a proxy is an instance of the stand-in ``numpy.float64`` (``numpy.int64``...): ``.dtype``,
``.item()``, operators and ``isinstance(x, np.floating)`` run on the worker, as for any remote
object. What the worker sent along in its handle (``sv``: ``str``, ``repr``, ``item()``) answers
``print``, ``float()``, ``int()``, ``bool()`` and ``format`` here with no round trip; a proxy
without it (the result of a pipelined call) asks the worker. ``sv`` is only text and numbers,
checked for their type: nothing in it runs here.
"""

from __future__ import annotations

import math
from typing import Any, Optional, Tuple

from radium_interposer import proxy
from radium_interposer.tags import PATH

__all__ = ["TYPES", "ScalarProxy", "bases"]

#: numpy's scalar types, by the path the worker names them with (``module.qualname``).
TYPES = frozenset(
    f"numpy.{name}"
    for name in (  # noqa: SIM905
        "bool bool_ int8 int16 int32 int64 longlong uint8 uint16 uint32 uint64 ulonglong "
        "float16 float32 float64 longdouble complex64 complex128 clongdouble "
        "datetime64 timedelta64 str_ bytes_ void intc uintc"
    ).split()
)
_REAL = (bool, int, float)


#: numpy's scalar types that derive from a Python type there (np.float64 is a float).
_PYTHON_BASES = {
    "numpy.float64": float,
    "numpy.complex128": complex,
    "numpy.str_": str,
    "numpy.bytes_": bytes,
}


def bases(path: str) -> Tuple[type, ...]:
    """The bases of the stand-in of the remote class at ``path``."""
    python = _PYTHON_BASES.get(path)
    if python is None:
        return (ScalarProxy,) if path in TYPES else (proxy.Remote,)
    # A proxy cannot be a float (their layouts differ), but isinstance() also asks __class__:
    # a float subclass of the same name answers isinstance(x, float) as numpy's would.
    name = path.rpartition(".")[2]
    like = type(name, (python,), {"__module__": "numpy", "__qualname__": name})
    spoof = {"__slots__": (), "__class__": property(lambda self: like)}
    return (type(f"{name}_proxy", (ScalarProxy,), spoof),)


def _known(obj: Any, key: str) -> Any:
    sent = object.__getattribute__(obj, "_rd_ref").get("sv")
    return sent.get(key) if isinstance(sent, dict) else None


def _text(obj: Any, key: str) -> Optional[str]:
    text = _known(obj, key)
    return text if type(text) is str else None


def _number(obj: Any) -> Any:
    """The scalar's ``item()`` when the worker sent it (a bool, int, float, complex or str)."""
    value = _known(obj, "v")
    if type(value) in _REAL or type(value) is str:
        return value
    pair = _known(obj, "c")
    if isinstance(pair, list) and len(pair) == 2 and all(type(x) in _REAL for x in pair):
        return complex(pair[0], pair[1])
    return None


class ScalarProxy(proxy.Remote):
    """A remote numpy scalar: what numpy would print and convert, answered from ``sv``."""

    __slots__ = ()

    def __repr__(self) -> str:
        text = _text(self, "r")
        return text if text is not None else proxy.Remote.__repr__(self)

    def __str__(self) -> str:
        text = _text(self, "s")
        return text if text is not None else proxy.Remote.__str__(self)

    def __format__(self, spec: str) -> str:
        # numpy formats its numbers as the Python number item() gives; "" as the worker said
        # (``f``, where that is not ``str``).
        value = _number(self)
        if spec and value is not None:
            return format(value, spec)
        text = None if spec else (_text(self, "f") or _text(self, "s"))
        return text if text is not None else proxy.Remote.__format__(self, spec)

    def __float__(self) -> float:
        value = _number(self)
        return float(value) if type(value) in _REAL else proxy.Remote.__float__(self)

    def __int__(self) -> int:
        value = _number(self)
        exact = type(value) in (bool, int) or (type(value) is float and math.isfinite(value))
        return int(value) if exact else proxy.Remote.__int__(self)

    def __index__(self) -> int:
        value = _number(self)
        return value if type(value) is int else proxy.Remote.__index__(self)

    def __bool__(self) -> bool:
        value = _number(self)
        return bool(value) if value is not None else proxy.Remote.__bool__(self)

    def __hash__(self) -> int:
        # numpy hashes its scalars as the Python value (a str's hash is this process's own).
        value = _number(self)
        return hash(value) if value is not None else proxy.Remote.__hash__(self)


def _remote(path: str) -> Any:
    """A method calling the Python builtin ``path`` on the worker, as numpy's scalar has it
    (``round(x, 2)`` is an ``np.float64`` there)."""

    def method(self: Any, *args: Any) -> Any:
        return proxy.invoke({"$": PATH, "p": path}, (self, *args), {}, "", False)

    method.__name__ = path.rpartition(".")[2]
    return method


# What Python numbers have and other remote objects need not: round(x, 4), math.floor(x)...
for _name, _path in (
    ("__round__", "builtins.round"),
    ("__trunc__", "math.trunc"),
    ("__floor__", "math.floor"),
    ("__ceil__", "math.ceil"),
    ("__divmod__", "builtins.divmod"),
):
    setattr(ScalarProxy, _name, _remote(_path))


def _rdivmod(self: Any, other: Any) -> Any:
    return proxy.invoke({"$": PATH, "p": "builtins.divmod"}, (other, self), {}, "", False)


ScalarProxy.__rdivmod__ = _rdivmod  # type: ignore[attr-defined]
