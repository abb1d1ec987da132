"""Linear algebra with numpy.linalg: systems, inverses, determinants, eigenvalues, SVD, least
squares, norms.

Follows https://numpy.org/doc/stable/user/absolute_beginners.html and the linear algebra part of
the Scientific Python Lectures (their steps and APIs, written for this corpus). Changed: a
seeded generator.
"""

import numpy as np

rng = np.random.default_rng(5)
a = rng.random((4, 4)) + 4 * np.eye(4)
b = rng.random(4)
x = np.linalg.solve(a, b)
print(np.allclose(a @ x, b), x.round(8))
inv = np.linalg.inv(a)
print(np.allclose(inv @ a, np.eye(4)), round(float(np.linalg.det(a)), 8))
s = a + a.T
w, v = np.linalg.eigh(s)
print(w.round(8), np.allclose(s @ v, v * w))
u, sv, vt = np.linalg.svd(a)
print(sv.round(8), np.allclose(u @ np.diag(sv) @ vt, a))
m = np.vstack([np.linspace(0, 1, 10), np.ones(10)]).T
y = 3 * np.linspace(0, 1, 10) + 1 + 0.01 * rng.standard_normal(10)
coef, residuals, rank, sing = np.linalg.lstsq(m, y, rcond=None)
print(coef.round(6), rank)
print(round(float(np.linalg.norm(a)), 8), np.linalg.matrix_rank(a), round(float(np.trace(a)), 8))
