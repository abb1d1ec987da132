"""A long-lived process's heap and Python's cyclic garbage collector.

A process that keeps a large, long-lived heap pays for all of it in every collection of the
oldest generation. Freezing what has survived so far (``gc.freeze``) takes it out of every later
collection. Two users:
- **The pool** (the placement index, its interned shapes and scores) makes many short-lived
  tuples per decision, and the decision a collection lands in paid for the whole heap. Settled,
  FGD's decision p99 on the Alibaba trace's cluster goes from about 1.04 to 0.91 ms
  (``benchmarks/scheduler.py``, which settles its pool the same way once it is built); it
  settles again every few minutes (:func:`settle_forever`).
- **The agent's mount helper** forks a child per container: a collection in the child walked
  every inherited object and copied each page it touched (~1.5 ms of each mount). It settles
  once, after its warm-up, before the first fork.

Frozen objects are never collected, so garbage cycles in them would stay forever: each settle
first unfreezes and collects everything (one full collection: 5 to 7 ms for the trace's
cluster).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time

__all__ = ["SETTLE_EVERY", "settle", "settle_forever"]

log = logging.getLogger(__name__)

#: Seconds between settles of a running pool.
SETTLE_EVERY = 300.0


def settle() -> float:
    """Collect everything, then freeze what survives; the seconds it took."""
    began = time.perf_counter()
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    return time.perf_counter() - began


async def settle_forever(interval: float = SETTLE_EVERY) -> None:
    """Settle the heap every ``interval`` seconds, for as long as the pool serves."""
    while True:
        await asyncio.sleep(interval)
        took = settle()
        log.debug("heap settled: %d objects frozen in %.1f ms", gc.get_freeze_count(), took * 1e3)
