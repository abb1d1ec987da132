"""numpy's scalar types and 0-d arrays: their reprs, dtypes, ``.item()``, how arithmetic and
reductions produce them, and a function that describes whatever it is given.

Follows https://numpy.org/doc/stable/reference/arrays.scalars.html and the "Array scalars"
part of https://numpy.org/doc/stable/user/basics.types.html (their examples and APIs, written
for this corpus). Changed: the examples are gathered into one program that prints each value.
"""

import numpy as np


def describe(x):
    """What a value is, as numpy sees it."""
    return (
        f"{x!r:<32} {type(x).__name__:<10} {np.asarray(x).dtype!s:<10} "
        f"shape={np.shape(x)} ndim={np.ndim(x)} scalar={np.isscalar(x)}"
    )


def halve(x):
    return x / 2


values = [
    np.float64(1.5), np.float32(0.1), np.float16(2.5), np.int8(-3), np.int32(7), np.int64(2**40),
    np.uint8(200), np.uint64(2**63), np.bool_(True), np.complex128(1 - 2j), np.complex64(3j),
    np.longdouble(0.5), np.str_("text"), np.bytes_(b"raw"), np.datetime64("2026-11-27"),
    np.timedelta64(3, "h"),
]  # fmt: skip
for value in values:
    print(describe(value))
for value in values:
    print(repr(value.item()), value.dtype, value.dtype.kind, value.itemsize)

zero_d = np.array(3.25)
print(describe(zero_d), repr(zero_d[()]), repr(zero_d.item()), zero_d.shape)
print(describe(np.array(7, dtype=np.int16)), describe(np.array(True)))
a = np.arange(6, dtype=np.int32).reshape(2, 3)
results = [a.sum(), a.mean(), a[1, 2], a.max(), np.float32(1) + np.float32(2),
           np.int8(100) + np.int8(20), np.sqrt(np.float64(2)), np.linalg.norm(a),
           np.dot(a[0], a[1]), a.sum(axis=None, keepdims=False)]  # fmt: skip
for x in results:
    print(describe(x))
print(describe(halve(np.float32(3))), describe(halve(np.int64(3))), describe(halve(zero_d)))
print(np.finfo(np.float32).eps, repr(np.iinfo(np.int16).max), np.float64(0.1) + np.float64(0.2))
print(isinstance(np.float64(1), float), isinstance(np.int64(1), int))
print(isinstance(values[0], np.generic), isinstance(values[3], np.signedinteger))
print(np.float64(1.5).as_integer_ratio(), np.float32(3.5).is_integer(), np.int64(5).bit_count())
