"""Polynomials: poly1d, fitting noisy data, the polynomial package.

Follows "More elaborate arrays / Polynomials" of the Scientific Python Lectures,
https://lectures.scientific-python.org/intro/numpy/advanced_operations.html (its steps and
APIs, written for this corpus). Changed: a seeded generator; no plotting.
"""

import numpy as np

p = np.poly1d([3, 2, -1])
print(p(0), p.roots.round(6), p.order)
rng = np.random.default_rng(12)
x = np.linspace(0, 1, 20)
y = np.cos(x) + 0.3 * rng.random(20)
p = np.poly1d(np.polyfit(x, y, 3))
t = np.linspace(0, 1, 5)
print(p(t).round(6))
p = np.polynomial.Polynomial([-1, 2, 3])
print(p(0), p.roots(), p.degree())
x = np.linspace(-1, 1, 20)
y = np.cos(x) + 0.3 * rng.random(20)
p = np.polynomial.Chebyshev.fit(x, y, 90)
print(p(np.array([-1.0, 0.0, 1.0])).round(4), len(p.coef))
