"""The operators of remote objects (``x + y``, ``x[i]``, ``x < y``...): each a call of the
``operator`` function of its name on the worker, through ``calls.invoke``."""

from __future__ import annotations

import operator
from typing import Any, Callable, Dict

from radium_interposer.tags import PATH

__all__ = ["install"]

_BINARY = "add sub mul matmul truediv floordiv mod pow lshift rshift and or xor".split()  # noqa: SIM905
#: ``getitem`` is a read (reads.Reads): an immutable object's answer is kept.
_OTHER = "lt le eq ne gt ge neg pos abs invert".split()  # noqa: SIM905


def install(cls: type, invoke: Callable[..., Any]) -> None:
    """Give the proxy class ``cls`` every operator, reflected and in-place ones too."""
    for name in _BINARY:
        function = name + "_" if name in ("and", "or") else name
        setattr(cls, f"__{name}__", _operator(invoke, function))
        setattr(cls, f"__r{name}__", _operator(invoke, function, reflected=True))
        setattr(cls, f"__i{name}__", _operator(invoke, f"i{name}"))
    for name in _OTHER:
        setattr(cls, f"__{name}__", _operator(invoke, name))


def _operator(invoke: Callable[..., Any], name: str, reflected: bool = False) -> Any:
    function = getattr(operator, name)
    path = {"$": PATH, "p": f"operator.{name}"}

    sites: Dict[str, str] = {}  # by the proxy's type: one string (its hash kept) per type

    def method(self: Any, *other: Any) -> Any:
        args = (other[0], self) if reflected else (self, *other)
        kind = object.__getattribute__(self, "_rd_type")
        site = sites.get(kind)
        if site is None:
            site = sites[kind] = f"{kind}|{name}|{int(reflected)}"
        return invoke(path, args, {}, site)

    method.__name__ = function.__name__
    return method
