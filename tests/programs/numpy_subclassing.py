"""Subclassing ndarray: an array carrying extra information through views, slices and ufuncs,
its classes defined inside a class of the program (as test suites and libraries group them).

Follows https://numpy.org/doc/stable/user/basics.subclassing.html (its InfoArray and
RealisticInfoArray, ``__new__``, ``__array_finalize__`` and ``__array_wrap__``, written for
this corpus). Changed: the subclasses are nested in a class ``Arrays``; printed results.
"""

import numpy as np


class Arrays:
    """Array types of this program, grouped."""

    class InfoArray(np.ndarray):
        def __new__(subtype, shape, dtype=float, buffer=None, offset=0, strides=None,
                    order=None, info=None):  # fmt: skip
            obj = super().__new__(subtype, shape, dtype, buffer, offset, strides, order)
            obj.info = info
            return obj

        def __array_finalize__(self, obj):
            if obj is None:
                return
            self.info = getattr(obj, "info", None)

    class RealisticInfoArray(np.ndarray):
        def __new__(cls, input_array, info=None):
            obj = np.asarray(input_array).view(cls)
            obj.info = info
            return obj

        def __array_finalize__(self, obj):
            if obj is None:
                return
            self.info = getattr(obj, "info", None)

        def __array_wrap__(self, out_arr, context=None, return_scalar=False):
            out_arr = super().__array_wrap__(out_arr, context, return_scalar)
            if isinstance(out_arr, Arrays.RealisticInfoArray):
                out_arr.info = f"{self.info} (after {context[0].__name__ if context else 'wrap'})"
            return out_arr


obj = Arrays.InfoArray(shape=(3,), info="information")
print(type(obj).__name__, type(obj).__qualname__, obj.info, obj.shape)
v = obj[1:]
print(type(v).__name__, v.info, isinstance(v, np.ndarray))
cast = np.arange(10).view(Arrays.InfoArray)
print(type(cast).__name__, cast.info, cast[2:5].tolist())

arr = np.arange(5)
obj = Arrays.RealisticInfoArray(arr, info="information")
print(type(obj).__name__, obj.info, obj.tolist())
v = obj[1:]
print(type(v).__name__, v.info, v.tolist())
doubled = np.multiply(obj, 2)
print(type(doubled).__name__, doubled.info, doubled.tolist())
print(type(obj + 1).__name__, (obj + 1).info, type(obj.sum()).__name__, int(obj.sum()))
print(isinstance(obj, Arrays.RealisticInfoArray), issubclass(Arrays.InfoArray, np.ndarray))
