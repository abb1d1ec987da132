"""NumPy operations: elementwise, comparisons, reductions, broadcasting, reshaping, sorting.

Follows "Numerical operations on arrays" of the Scientific Python Lectures,
https://lectures.scientific-python.org/intro/numpy/operations.html (its steps and APIs, written
for this corpus). Changed: a seeded generator; no plotting; no file reading.
"""

import numpy as np

a = np.array([1, 2, 3, 4])
print(a + 1, 2**a)
b = np.ones(4) + 1
print(a - b, a * b)
j = np.arange(5)
print(2 ** (j + 1) - j)
c = np.ones((3, 3))
print(c * c, c.dot(c))
a = np.array([1, 2, 3, 4])
b = np.array([4, 2, 2, 4])
print(a == b, a > b, np.array_equal(a, b))
a = np.array([1, 1, 0, 0], dtype=bool)
b = np.array([1, 0, 1, 0], dtype=bool)
print(np.logical_or(a, b), np.logical_and(a, b))
a = np.arange(5)
print(np.sin(a).round(6), np.log(a + 1).round(6), np.exp(a).round(6))
a = np.triu(np.ones((3, 3)), 1)
print(a, a.T)

x = np.array([1, 2, 3, 4])
print(np.sum(x), x.sum())
x = np.array([[1, 1], [2, 2]])
print(x.sum(axis=0), x[:, 0].sum(), x[:, 1].sum(), x.sum(axis=1))
x = np.array([1, 3, 2])
print(x.min(), x.max(), x.argmin(), x.argmax())
print(np.all([True, True, False]), np.any([True, True, False]))
x = np.array([1, 2, 3, 1])
y = np.array([[1, 2, 3], [5, 6, 1]])
print(x.mean(), np.median(x), np.median(y, axis=-1), x.std())

a = np.tile(np.arange(0, 40, 10), (3, 1)).T
b = np.array([0, 1, 2])
print(a + b)
a = np.arange(0, 40, 10)
a = a[:, np.newaxis]
print(a.shape, a + b)
mileposts = np.array([0, 198, 303, 736, 871, 1175, 1475, 1544, 1913, 2448])
distance_array = np.abs(mileposts - mileposts[:, np.newaxis])
print(distance_array)
x, y = np.arange(5), np.arange(5)[:, np.newaxis]
print(np.sqrt(x**2 + y**2).round(4))

a = np.array([[1, 2, 3], [4, 5, 6]])
print(a.ravel(), a.T, a.T.ravel())
b = a.ravel().reshape((2, 3))
print(b)
z = np.array([1, 2, 3])
print(z[:, np.newaxis], z[np.newaxis, :])
a = np.arange(4 * 3 * 2).reshape(4, 3, 2)
print(a.shape, a[0, 2, 1])
b = a.transpose(1, 2, 0)
print(b.shape, b[2, 1, 0])

a = np.array([[4, 3, 5], [1, 2, 1]])
print(np.sort(a, axis=1))
a = np.array([4, 3, 1, 2])
j = np.argsort(a)
print(j, a[j])
rng = np.random.default_rng(0)
walks = rng.choice([-1, 1], size=(100, 200))
positions = np.cumsum(walks, axis=1)
print(np.sqrt((positions**2).mean(axis=0))[[9, 49, 99, 199]].round(4))
