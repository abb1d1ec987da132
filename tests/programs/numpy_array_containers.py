"""A custom array container: a diagonal array that numpy functions and ufuncs accept, through
``__array__``, ``__array_ufunc__`` and ``__array_function__``.

Follows https://numpy.org/doc/stable/user/basics.dispatch.html (its DiagonalArray, the
``implements`` registry of HANDLED_FUNCTIONS, ``np.sum`` and ``np.mean`` overrides, written for
this corpus). Changed: printed results; a second, ``__array__``-only class (a table of rows, as
data frame libraries offer) converted by ``np.asarray`` and ``np.mean``.
"""

import numbers

import numpy as np

HANDLED_FUNCTIONS = {}


class DiagonalArray:
    def __init__(self, N, value):
        self._N = N
        self._i = value

    def __repr__(self):
        return f"{self.__class__.__name__}(N={self._N}, value={self._i})"

    def __array__(self, dtype=None, copy=None):
        if copy is False:
            raise ValueError("`copy=False` isn't supported. A copy is always created.")
        return self._i * np.eye(self._N, dtype=dtype)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method == "__call__":
            N = None
            scalars = []
            for input in inputs:
                if isinstance(input, numbers.Number):
                    scalars.append(input)
                elif isinstance(input, self.__class__):
                    scalars.append(input._i)
                    if N is not None and N != input._N:
                        raise TypeError("inconsistent sizes")
                    N = input._N
                else:
                    return NotImplemented
            return self.__class__(N, ufunc(*scalars, **kwargs))
        return NotImplemented

    def __array_function__(self, func, types, args, kwargs):
        if func not in HANDLED_FUNCTIONS:
            return NotImplemented
        if not all(issubclass(t, self.__class__) for t in types):
            return NotImplemented
        return HANDLED_FUNCTIONS[func](*args, **kwargs)


def implements(np_function):
    """Register an __array_function__ implementation for DiagonalArray objects."""

    def decorator(func):
        HANDLED_FUNCTIONS[np_function] = func
        return func

    return decorator


@implements(np.sum)
def diagonal_sum(arr):
    return arr._i * arr._N


@implements(np.mean)
def diagonal_mean(arr):
    return arr._i / arr._N


class Rows:
    """Rows of numbers that convert to a 2-d array."""

    def __init__(self, rows):
        self.rows = rows

    def __array__(self, dtype=None, copy=None):
        return np.array(self.rows, dtype=dtype)


arr = DiagonalArray(5, 1)
print(arr, type(arr).__name__)
print(np.asarray(arr).tolist())
print(np.array(arr, dtype=np.int8).dtype, np.asarray(arr).trace())
print(np.multiply(arr, 2), arr.__array_ufunc__(np.add, "__call__", arr, 3))
print(np.sin(arr), np.add(arr, arr))
print(np.sum(arr), np.mean(arr))
try:
    np.concatenate([arr, arr])
except TypeError as e:
    print("TypeError:", e)
print(np.multiply.reduce(np.asarray(arr), axis=0).tolist())
table = Rows([[1, 2, 3], [4, 5, 6]])
print(np.asarray(table).shape, np.mean(table), np.asarray(table, dtype=float).sum(axis=0).tolist())
print((np.ones(3) + np.asarray(Rows([[1, 1, 1]]))).tolist())
