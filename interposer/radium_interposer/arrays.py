"""Arrays received from the other side: numpy arrays over the received bytes when this side has
numpy, else Python values (docs/data-plane.md, "Values"; docs/remoting.md, "Remote objects").

Without numpy an array is nested lists as long as it is small: lists of Python objects take up
to ~40 times the array's bytes (256 MiB of ``u1`` became 2.8 GiB), so a larger one is a
``memoryview`` shaped like the array, over the received bytes (no copy). Either way what the
other side declares (dtype, shape) is checked against the bytes that came before anything is
allocated for it.
"""

from __future__ import annotations

import struct
import sys
from typing import Any, Dict, List, Optional, Tuple

from radium_interposer.structs import DecodeError

__all__ = ["LIST_ITEMS", "decode", "without_numpy"]

#: Arrays of more items than this (values, plus the lists that hold them) reach a side without
#: numpy as a shaped memoryview, not as nested lists: at most ~40 MiB of Python objects.
LIST_ITEMS = 1 << 20

#: struct codes of the dtypes a side without numpy reads (numpy's ``dtype.str`` without its
#: byte order character).
_STRUCT_CODES = {
    "b1": "?",
    "i1": "b",
    "u1": "B",
    "i2": "h",
    "u2": "H",
    "i4": "i",
    "u4": "I",
    "i8": "q",
    "u8": "Q",
    "f4": "f",
    "f8": "d",
}
#: Byte order characters this machine reads as its own.
_NATIVE = ("|", "=", "<" if sys.byteorder == "little" else ">")


def decode(node: Dict[str, Any], buffer: Any, np: Optional[Any]) -> Any:
    """The array ``node`` describes over ``buffer``: with numpy ``np``, an array (no copy; its
    scalar for ``sc``); without, Python values (:func:`without_numpy`)."""
    shape = _shape(node.get("sh"))
    dtype = node.get("dt")
    if not isinstance(dtype, str):
        raise DecodeError("an array without a dtype string")
    if np is None:
        return without_numpy(dtype, shape, buffer, bool(node.get("sc")))
    kind = np.dtype(dtype)
    if kind.hasobject:
        raise DecodeError(f"arrays of dtype {dtype} cannot cross the data plane")
    array = np.frombuffer(buffer, dtype=kind).reshape(shape)
    return array[()] if node.get("sc") else array


def _shape(value: Any) -> Tuple[int, ...]:
    if not isinstance(value, list) or len(value) > 64:
        raise DecodeError("an array's shape must be a list of at most 64 sizes")
    if not all(type(n) is int and n >= 0 for n in value):
        raise DecodeError(f"an array's shape must be sizes (integers >= 0), not {value!r}")
    return tuple(value)


def without_numpy(dtype: str, shape: Tuple[int, ...], buffer: Any, scalar: bool) -> Any:
    """An array as Python values: a scalar, nested lists (up to :data:`LIST_ITEMS` items), or a
    memoryview shaped like it (``.shape``, ``.format``, ``.tolist()``, ``.tobytes()``,
    ``view[i, j]``), over ``buffer`` itself."""
    code = _STRUCT_CODES.get(dtype[1:])
    if dtype[:1] in _NATIVE and (dtype[1:2] in ("c", "S", "U") or dtype[1:] == "f2"):
        return _items(dtype, shape, memoryview(buffer).cast("B"), scalar)
    if code is None or dtype[:1] not in _NATIVE:
        raise DecodeError(f"arrays of dtype {dtype} need numpy on this side")
    raw = memoryview(buffer).cast("B")
    count = _product(shape)
    if raw.nbytes != count * struct.calcsize(code):
        raise DecodeError(
            f"an array of shape {list(shape)} and dtype {dtype} does not match its "
            f"{raw.nbytes} bytes"
        )
    if scalar or not shape:
        if count != 1:
            raise DecodeError(f"a scalar of {count} values")
        return raw.cast(code)[0]  # type: ignore[call-overload]
    if count == 0:
        return _empty(shape)
    if count + _product(shape[:-1]) > LIST_ITEMS:
        return raw.cast(code, list(shape))  # type: ignore[call-overload]
    return raw.cast(code, list(shape)).tolist()  # type: ignore[call-overload]


def _product(sizes: Tuple[int, ...]) -> int:
    total = 1
    for size in sizes:
        total *= size
    return total


def _empty(shape: Tuple[int, ...]) -> List[Any]:
    """The nested lists of an array with no values (a memoryview cannot have a 0 in its shape)."""
    rows = 1
    for size in shape:
        if size == 0:
            break
        rows *= size
        if rows > LIST_ITEMS:
            raise DecodeError(f"an empty array of shape {list(shape)} is too many lists")
    return _empty_lists(shape)


def _empty_lists(shape: Tuple[int, ...]) -> List[Any]:
    if not shape or shape[0] == 0:
        return []
    return [_empty_lists(shape[1:]) for _ in range(shape[0])]


def _items(dtype: str, shape: Tuple[int, ...], raw: memoryview, scalar: bool) -> Any:
    """Half floats, complex numbers and strings (``f2``, ``c8``, ``c16``, ``S<n>``, ``U<n>``) as
    numpy's ``item()`` gives them (strings without their trailing NULs), in nested lists up to
    LIST_ITEMS (a memoryview cannot hold them)."""
    kind, size = dtype[1], dtype[2:]
    if not size.isdigit() or (kind == "c" and size not in ("8", "16")):
        raise DecodeError(f"arrays of dtype {dtype} need numpy on this side")
    width, count = int(size) * (4 if kind == "U" else 1), _product(shape)
    if raw.nbytes != count * width:
        raise DecodeError(f"an array of shape {list(shape)} and dtype {dtype} does not match")
    if count + _product(shape[:-1]) > LIST_ITEMS:
        raise DecodeError(f"an array of {count} values of dtype {dtype} needs numpy on this side")
    if width == 0:
        flat: List[Any] = [b"" if kind == "S" else ""] * count
    elif kind == "f":
        flat = [value for (value,) in struct.iter_unpack("e", raw)]
    elif kind == "c":
        parts = raw.cast("f" if size == "8" else "d").tolist()
        flat = [complex(re, im) for re, im in zip(parts[::2], parts[1::2])]
    else:
        chunks = (raw[i * width : (i + 1) * width].tobytes() for i in range(count))
        codec = "utf-32-le" if sys.byteorder == "little" else "utf-32-be"
        flat = [c.rstrip(b"\0") if kind == "S" else c.decode(codec).rstrip("\0") for c in chunks]
    if scalar or not shape:
        if count != 1:
            raise DecodeError(f"a scalar of {count} values")
        return flat[0]
    for size_ in reversed(shape[1:]):  # nest: the innermost rows first
        flat = [flat[i : i + size_] for i in range(0, len(flat), size_)] if size_ else flat
    return flat if count else _empty(shape)
