"""The program's iterators passed to remote calls (docs/remoting.md, "Your iterators, passed by
reference"): a generator, a ``map``, an iterator partly used here, each iterated from the
worker one item at a time, with numpy's own results and errors."""

from __future__ import annotations

from tests.interposer.harness import WorkerHarness

PROGRAM = """
import itertools

import numpy as np

print(np.fromiter((x * x for x in range(5)), dtype=float).tolist())
print(np.fromiter(map(float, "123"), float).tolist())
try:
    np.column_stack(np.arange(3) for _ in range(2))
except TypeError as e:
    print("TypeError:", e)
print(np.column_stack([np.arange(3) for _ in range(2)]).tolist())

it = iter(range(6))
print(next(it), next(it))
print(np.fromiter(it, dtype=np.int64, count=2).tolist())
print(list(it))  # what the worker did not take is still here

counter = itertools.count(10)
print(np.fromiter(counter, dtype=int, count=3).tolist(), next(counter))


def numbers():
    yield 1
    yield 2
    raise ValueError("the generator failed")


try:
    np.fromiter(numbers(), dtype=float)
except ValueError as e:
    print("ValueError:", e)
print(np.fromiter(zip(range(3), "abc"), dtype=np.dtype([("i", int), ("s", "U1")])).tolist())
"""


def test_iterators_are_iterated_from_the_worker(harness: WorkerHarness) -> None:
    out = harness.same_as_local(PROGRAM, remote="numpy")
    assert "must be passed as a" in out and "[2, 3]\n[4, 5]" in out
