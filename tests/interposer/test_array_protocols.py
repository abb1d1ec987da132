"""The program's own objects that implement numpy's protocols, passed to remote numpy
(docs/remoting.md, "Your files and array objects, passed by reference"): remote numpy
dispatches back to them as local numpy does, with the same results and the same errors."""

from __future__ import annotations

from tests.interposer.harness import WorkerHarness

PROGRAM = """
import numpy as np


class ArrayFunctionInterceptor:  # as in numpy's own tests (test_overrides.py)
    def __array_function__(self, func, types, args, kwargs):
        print("seen:", func is np.concatenate, types == (ArrayFunctionInterceptor,),
              args[0][0] is self, kwargs)
        return "intercepted"


x = ArrayFunctionInterceptor()
print(np.concatenate([x, x], axis=0))


class Wrapped:  # only __array__: numpy converts it, by calling it back
    def __init__(self, values):
        self.values = values

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.values, dtype=dtype)


w = Wrapped([1.0, 2.0, 3.0])
print(np.asarray(w).tolist(), np.sum(w), np.asarray(w, dtype=np.int64).dtype)
print((np.ones(3) + np.asarray(w)).tolist(), np.dot(w, w))


class Refuses:
    def __array_function__(self, func, types, args, kwargs):
        return NotImplemented


try:
    np.mean(Refuses())
except TypeError as e:
    print("TypeError:", e)

HANDLED = {}


def implements(function):
    def register(f):
        HANDLED[function] = f
        return f

    return register


class Diagonal:  # the NEP 18 example: some functions handled, the rest refused
    def __init__(self, n, value):
        self.n, self.value = n, value

    def __array__(self, dtype=None, copy=None):
        return self.value * np.eye(self.n, dtype=dtype)

    def __array_function__(self, func, types, args, kwargs):
        if func not in HANDLED or not all(issubclass(t, Diagonal) for t in types):
            return NotImplemented
        return HANDLED[func](*args, **kwargs)


@implements(np.sum)
def _sum(d, axis=None):
    return d.n * d.value


d = Diagonal(4, 2.5)
print(np.sum(d), np.trace(np.asarray(d)))
try:
    np.mean(d)
except TypeError as e:
    print("TypeError:", e)


class Ufuncs:
    def __init__(self, value):
        self.value = value

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        values = [i.value if isinstance(i, Ufuncs) else i for i in inputs]
        return Ufuncs(getattr(ufunc, method)(*values, **kwargs))


u = np.add(Ufuncs(np.arange(3)), 10)
print(type(u).__name__, u.value.tolist(), np.multiply(Ufuncs(2), Ufuncs(3)).value)
print(np.add.reduce(Ufuncs(np.arange(4))).value, (np.arange(3) * Ufuncs(2)).value.tolist())


class OptOut:
    __array_ufunc__ = None

    def __radd__(self, other):
        return "radd"


print(np.arange(3) + OptOut())
try:
    np.add(np.arange(3), OptOut())
except TypeError as e:
    print("TypeError:", e)
"""


def test_remote_numpy_dispatches_to_the_program_s_objects(harness: WorkerHarness) -> None:
    out = harness.same_as_local(PROGRAM, remote="numpy")
    lines = out.splitlines()
    assert lines[:2] == ["seen: True True True {'axis': 0}", "intercepted"]
    assert "[1.0, 2.0, 3.0] 6.0 int64" in out
    assert "TypeError: no implementation found for 'numpy.mean' on types that implement " in out
    assert "Ufuncs [10, 11, 12] 6" in out
    assert "radd" in lines


def test_what_the_worker_names_runs_nothing_here() -> None:
    """A path from the worker is a remoted module's function only when the program has that
    module remoted (an attribute it already lists), else a path proxy; nothing is imported or
    called. An id of an object the program never passed is refused."""
    import sys

    import pytest

    from radium_interposer import client_objects, proxy

    before = set(sys.modules)
    found = proxy.decode({"$": "p", "p": "xml.dom.minidom.parseString"}, [])
    assert isinstance(found, proxy.Remote)
    assert set(sys.modules) == before
    with pytest.raises(LookupError):
        client_objects.lookup(12345)
    assert client_objects.reference(NotImplemented) == {"$": "p", "p": "builtins.NotImplemented"}
    assert client_objects.reference(object()) is None
    assert client_objects.reference(3) is None
