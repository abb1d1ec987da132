"""NumPy arrays: creation, dtypes, indexing and slicing, views and copies, fancy indexing.

Follows "The NumPy array object" of the Scientific Python Lectures,
https://lectures.scientific-python.org/intro/numpy/array_object.html (its steps and APIs,
written for this corpus). Changed: a seeded generator; no plotting.
"""

import numpy as np

a = np.array([0, 1, 2, 3])
print(a, a.ndim, a.shape, len(a))
b = np.array([[0, 1, 2], [3, 4, 5]])
print(b.ndim, b.shape, len(b))
print(np.arange(10), np.arange(1, 9, 2))
print(np.linspace(0, 1, 6), np.linspace(0, 1, 5, endpoint=False))
print(np.ones((3, 3)), np.zeros((2, 2)), np.eye(3), np.diag(np.array([1, 2, 3, 4])))
rng = np.random.default_rng(27446968)
print(rng.random(4).round(6), rng.standard_normal(4).round(6))
print(np.array([1, 2, 3]).dtype, np.array([1.0, 2.0]).dtype, np.array([1, 2], dtype=float).dtype)
print(np.array([1 + 2j]).dtype, np.array([True, False]).dtype, np.array(["Bonjour"]).dtype)

a = np.diag(np.arange(3))
print(a[1, 1], a[2, 1], a[1])
a[2, 1] = 10
print(a)
a = np.arange(10)
print(a[2:9:3], a[:4], a[1:3], a[::2], a[3:], a[::-1])
a[5:] = 10
print(a)

a = np.arange(10)
b = a[::2]
print(np.may_share_memory(a, b))
b[0] = 12
print(a)
c = a[::2].copy()
c[0] = 99
print(a, np.may_share_memory(a, c))

a = rng.integers(0, 21, 15)
print(a, a % 3 == 0, a[a % 3 == 0])
a[a % 3 == 0] = -1
print(a)
a = np.arange(0, 100, 10)
print(a[[2, 3, 2, 4, 2]])
a[[9, 7]] = -100
print(a)
a = np.arange(10)
idx = np.array([[3, 4], [9, 7]])
print(idx.shape, a[idx])
