"""A heap settle (the pool's, the mount helper's): what it freezes is still collected at the
next settle."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from radium import gc_tuning


class Node:
    def __init__(self) -> None:
        self.peer: Node | None = None


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()


def test_settle_freezes_what_lives() -> None:
    kept = [Node() for _ in range(100)]
    gc_tuning.settle()
    assert gc.get_freeze_count() >= len(kept)


def test_a_frozen_cycle_is_collected_at_the_next_settle() -> None:
    a, b = Node(), Node()
    a.peer, b.peer = b, a
    gone = weakref.ref(a)
    gc_tuning.settle()  # the cycle is frozen: no collection can free it now
    del a, b
    gc.collect()
    assert gone() is not None
    gc_tuning.settle()
    assert gone() is None
