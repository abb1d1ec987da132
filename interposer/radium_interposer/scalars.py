"""numpy scalars on the way back to a client: by value to a client that has numpy of its own,
as remote objects to one that has not (docs/remoting.md, "numpy scalars").

A client without numpy (numpy remoted, or never imported) cannot hold an ``np.float64``: sent by
value it would become a Python ``float`` (no ``.dtype``, another ``repr``). So it gets a handle,
and its proxy is an instance of the stand-in ``numpy.float64``. The handle carries ``sv``, what
the scalar is as Python text and number (``repr``, ``str``, ``item()``), so that printing it or
``float()``/``int()``/``bool()`` on it cost no round trip, as a plain value did before.

The worker learns whether its client has numpy from the client's ``cl`` key
(:mod:`radium_interposer.peer`); it is per connection, and each connection is served by one
thread, so it is kept per thread here.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Dict, Optional

from radium_interposer import nested, reflection
from radium_interposer.tags import SCALAR_VALUE

__all__ = ["MAX_BYTES", "by_value", "describe", "load", "peer", "peer_has_numpy", "plain"]

#: What the client served by this thread told about itself; ``numpy``: it has numpy of its own.
#: A client that never said (an older interposer) is taken to have it, as before.
peer = threading.local()
#: Python types of ``item()`` that ``sv`` carries (JSON numbers and booleans).
_NUMBERS = (bool, int, float)
#: Longest ``str``/``repr`` carried in ``sv`` (longer ones are asked for when needed).
_TEXT = 4096


def peer_has_numpy() -> bool:
    """Whether the client of the call this thread runs has numpy of its own."""
    return bool(getattr(peer, "numpy", True))


def _numpy() -> Any:
    """This process's own numpy, or None (not imported, or the stand-in of a remote one)."""
    global _seen, _own
    np = sys.modules.get("numpy")
    if np is not _seen:  # asked at every request: the answer is kept per module object
        _seen, _own = np, None if np is None or reflection.remote_module(np) else np
    return _own


_seen: Any = None
_own: Any = None


def plain(obj: Any) -> bool:
    """Whether a numpy value (array or scalar) is sent by value as a result: a scalar of a
    dtype that crosses, to a client that has numpy. Arrays stay remote until fetched."""
    np = _numpy()
    return (
        np is not None
        and isinstance(obj, np.generic)
        and not obj.dtype.hasobject
        and peer_has_numpy()
    )


#: The largest numpy scalar sent by value (its bytes, as hex, in the tree): a ``U`` string
#: longer than this stays remote as a handle.
MAX_BYTES = 256


def by_value(obj: Any) -> Optional[Dict[str, Any]]:
    """A numpy scalar result for a client without numpy, as an ``sv`` node: its dtype, its bytes
    and its text (``sv``). A scalar is immutable and small, so the client holds it as a proxy
    whose reference is this node and sends it back by value: no handle is made or released.
    None for anything else (then it is a handle, or a value for a client with numpy)."""
    np = _numpy()
    if np is None or not isinstance(obj, np.generic) or peer_has_numpy():
        return None
    dtype = obj.dtype
    if dtype.hasobject or dtype.fields is not None or dtype.itemsize > MAX_BYTES:
        return None
    node = {"$": SCALAR_VALUE, "dt": dtype.str, "b": np.asarray(obj).tobytes().hex(),
            "t": nested.type_name(type(obj))}  # fmt: skip
    describe(obj, node)
    return node


def load(node: Dict[str, Any]) -> Any:
    """The numpy scalar an ``sv`` node holds (sent back by the client)."""
    np = _numpy()
    raw, kind = node.get("b"), node.get("dt")
    if np is None or not isinstance(raw, str) or not isinstance(kind, str):
        raise ValueError("sv: a numpy scalar needs numpy here, its dtype and its bytes")
    dtype = np.dtype(kind)
    data = bytes.fromhex(raw)
    if dtype.hasobject or dtype.fields is not None or len(data) != dtype.itemsize:
        raise ValueError(f"sv: {len(data)} bytes are not one {dtype}")
    return np.frombuffer(data, dtype=dtype)[0]


def describe(obj: Any, node: Dict[str, Any]) -> None:
    """Add ``sv`` to the handle ``node`` of a numpy scalar sent to a client without numpy."""
    np = _numpy()
    if np is None or not isinstance(obj, np.generic) or peer_has_numpy():
        return
    value: Dict[str, Any] = {}
    try:
        _texts(obj, value)
    except Exception:  # printing it raises (a datetime64 of generic units): when it is printed
        value.clear()
    # Only where item() is exact (not longdouble); datetime64 & co. are asked for when needed.
    kind = obj.dtype.kind
    if kind in "biufcU" and (kind == "U" or obj.dtype.itemsize <= (16 if kind == "c" else 8)):
        item = obj.item()
        if type(item) in _NUMBERS or (type(item) is str and len(item) <= _TEXT):
            value["v"] = item  # a str: hash(x) is the str's, as numpy's (dict keys)
        elif type(item) is complex:
            value["c"] = [item.real, item.imag]
    node["sv"] = value


def _texts(obj: Any, value: Dict[str, Any]) -> None:
    """``str``, ``repr`` and ``format`` of a scalar, when short enough to send along."""
    text, shown = str(obj), repr(obj)
    if len(text) <= _TEXT and len(shown) <= _TEXT:
        value["s"], value["r"] = text, shown
        formatted = format(obj, "")  # f"{x}": numpy formats its floats as Python's, not as str
        if formatted != text and len(formatted) <= _TEXT:
            value["f"] = formatted
