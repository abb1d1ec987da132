"""The user's own functions applied by numpy: vectorize, apply_along_axis, fromfunction.

Follows "Functions and vectorization" usage shown in https://numpy.org/doc/stable/reference/
generated/numpy.vectorize.html and numpy.apply_along_axis.html (their examples' steps, written
for this corpus). Changed: nothing but the wrapping into functions.
"""

import numpy as np


def myfunc(a, b):
    """Return a-b if a>b, otherwise return a+b."""
    if a > b:
        return a - b
    return a + b


def my_func(a):
    """Average the first and last element of a 1-D array."""
    return (a[0] + a[-1]) * 0.5


def distance(i, j):
    return np.sqrt(i**2 + j**2)


vfunc = np.vectorize(myfunc)
print(vfunc([1, 2, 3, 4], 2))
b = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
print(np.apply_along_axis(my_func, 0, b), np.apply_along_axis(my_func, 1, b))
print(np.fromfunction(distance, (3, 3)).round(4))
print(np.apply_along_axis(sorted, 1, np.array([[8, 1, 7], [4, 3, 9]])))
