"""numpy's errors and warnings as a program handles them: a singular matrix caught as
``LinAlgError`` and reported with ``str(e)``, floating-point errors under ``np.errstate``,
``np.testing.assert_raises`` as a context manager, and ``np.polyfit``'s ``RankWarning``
recorded with ``warnings.catch_warnings`` and turned into an error.

Follows the examples of https://numpy.org/doc/stable/reference/generated/numpy.linalg.LinAlgError.html,
https://numpy.org/doc/stable/reference/generated/numpy.errstate.html,
https://numpy.org/doc/stable/reference/generated/numpy.testing.assert_raises.html and
https://numpy.org/doc/stable/reference/generated/numpy.polyfit.html (its "Illustration" with
the RankWarning), written for this corpus. Changed: gathered into one program that prints what
each step caught.
"""

import warnings

import numpy as np


def invert(m):
    try:
        return np.linalg.inv(m)
    except np.linalg.LinAlgError as e:
        print("LinAlgError:", str(e), "|", e.args, "|", type(e).__name__)
        return None


def fit(x, y, deg):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        coefficients = np.polyfit(x, y, deg)
    for w in caught:
        print("caught", w.category.__name__, "-", w.message)
    return coefficients


print(invert(np.array([[1.0, 2.0], [3.0, 4.0]])).round(6).tolist())
print(invert(np.zeros((2, 2))))
try:
    np.linalg.cholesky(np.array([[1.0, 2.0], [2.0, 1.0]]))
except np.linalg.LinAlgError as e:
    print(repr(str(e)), isinstance(e, ValueError))

with np.errstate(divide="ignore", invalid="ignore"):
    print((np.array([1.0, 0.0, -1.0]) / 0).tolist())
with np.errstate(divide="raise"):
    try:
        np.array([1.0]) / 0
    except FloatingPointError as e:
        print("FloatingPointError:", e)
print(np.geterr()["divide"], np.geterr()["over"])
old = np.seterr(over="raise")
try:
    np.float32(3e38) * np.float32(10)
except FloatingPointError as e:
    print("overflow raised:", e)
np.seterr(**old)

with np.testing.assert_raises(ValueError):
    np.arange(6).reshape(4, 4)
print("assert_raises saw the ValueError")
try:
    with np.testing.assert_raises(ZeroDivisionError):
        np.ones(3).sum()
except AssertionError as e:
    print("AssertionError:", e)
np.testing.assert_raises(TypeError, np.add, 1, "a")
print("assert_raises (callable form) saw the TypeError")

x = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
y = np.array([0.0, 0.8, 0.9, 0.1, -0.8, -1.0])
print(fit(x, y, 3).round(6).tolist())
print(len(fit(x, y, 30)), "coefficients")
with warnings.catch_warnings():
    warnings.simplefilter("error", np.exceptions.RankWarning)
    try:
        np.polyfit(x, y, 30)
    except np.exceptions.RankWarning as e:
        print("as an error:", type(e).__name__, e)
with warnings.catch_warnings():
    warnings.simplefilter("ignore", np.exceptions.RankWarning)
    print(np.polyfit(x, y, 30).shape, "(ignored)")
