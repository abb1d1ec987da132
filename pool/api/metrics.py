"""The pool's Prometheus series (docs/metrics.md).

Counters and the latency histogram are observed as requests come (``PoolMetrics`` is the
pool's ``Observer``); everything that is state (devices, leases, waiters, acceptors, images,
queues) is read from the pool at each scrape, so keeping it costs the allocation path nothing.
The scrape runs in the HTTP server's thread while the pool's state belongs to its event loop:
the reading is done on the loop (``on_loop``), so it sees one consistent state.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections import Counter as Tally
from collections.abc import Callable, Iterator
from typing import TypeVar

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from radium.errors import CapacityError, QuotaError, RadiumError
from radium.pool.core.dispatcher import Dispatcher

__all__ = ["BUCKETS", "SCRAPE_TIMEOUT", "PoolMetrics", "on_loop", "outcome"]

T = TypeVar("T")
#: Allocation latency buckets: a decision is about a millisecond; waiting for capacity, minutes.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 60, 300, 3600)
SCRAPE_TIMEOUT = 5.0


def outcome(error: BaseException | None, waited: bool) -> str:
    """An allocation's outcome label: granted, or what the caller can act on."""
    if error is None:
        return "granted"
    if isinstance(error, QuotaError):
        return "over_quota"
    if isinstance(error, CapacityError):
        return "timed_out" if waited else "no_capacity"
    if isinstance(error, RadiumError):
        return error.kind.replace(" ", "_")
    return "cancelled" if isinstance(error, asyncio.CancelledError) else "internal"


def on_loop(loop: asyncio.AbstractEventLoop) -> Callable[[Callable[[], T]], T]:
    """Run a function on ``loop`` from another thread and wait for its result."""

    def call(function: Callable[[], T]) -> T:
        done: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                done.set_result(function())
            except BaseException as exc:  # handed to the waiting thread, which raises it
                done.set_exception(exc)

        loop.call_soon_threadsafe(run)
        return done.result(timeout=SCRAPE_TIMEOUT)

    return call


class PoolMetrics:
    """The pool's series in ``registry``."""

    def __init__(
        self,
        pool: Dispatcher,
        registry: CollectorRegistry,
        call: Callable[[Callable[[], list[Metric]]], list[Metric]] = lambda f: f(),
    ) -> None:
        self.allocations = Counter(
            "radium_pool_allocations",
            "Allocation requests answered, by outcome",
            ["outcome"],
            registry=registry,
        )
        self.latency = Histogram(
            "radium_pool_allocation_duration_seconds",
            "Time from an allocation request to its answer, waiting for capacity included",
            buckets=BUCKETS,
            registry=registry,
        )
        self.ended = Counter(
            "radium_pool_leases_ended",
            "Leases ended, by how (released, expired, revoked, preempted)",
            ["state"],
            registry=registry,
        )
        registry.register(_StateCollector(pool, call))
        self._by_outcome: dict[str, Counter] = {}
        self._by_state: dict[str, Counter] = {}

    # -- the pool's Observer ---------------------------------------------------------------

    def allocation(self, error: BaseException | None, waited: bool, seconds: float) -> None:
        _series(self._by_outcome, self.allocations, outcome(error, waited)).inc()
        self.latency.observe(seconds)

    def lease_ended(self, state: str) -> None:
        _series(self._by_state, self.ended, state).inc()


def _series(known: dict[str, Counter], counter: Counter, label: str) -> Counter:
    """``counter``'s series of ``label``, looked up once: every lease call counts, and
    ``labels()`` costs three times the increment. Labels are a closed set (outcomes, states)."""
    found = known.get(label)
    if found is None:
        found = known[label] = counter.labels(label)
    return found


class _StateCollector:
    def __init__(
        self, pool: Dispatcher, call: Callable[[Callable[[], list[Metric]]], list[Metric]]
    ) -> None:
        self.pool, self.call = pool, call

    def describe(self) -> list[Metric]:
        return []  # series depend on the state: nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        yield from self.call(lambda: list(self._read()))

    def _read(self) -> Iterator[Metric]:
        state, pool = self.pool.state, self.pool
        per_device = ["acceptor", "device"]
        allocated = GaugeMetricFamily(
            "radium_pool_device_allocated_ratio",
            "Share of the device's memory held by leases",
            labels=per_device,
        )
        held = GaugeMetricFamily(
            "radium_pool_device_allocated_memory_bytes",
            "Device memory held by leases",
            labels=per_device,
        )
        size = GaugeMetricFamily(
            "radium_pool_device_memory_bytes", "Device memory", labels=per_device
        )
        for acceptor, device in state.device_states():
            labels = [acceptor.name, device.device.id]
            allocated.add_metric(labels, device.allocated_fraction)
            held.add_metric(labels, device.used_mib << 20)
            size.add_metric(labels, device.device.memory_mib << 20)
        yield from (allocated, held, size)

        leases = GaugeMetricFamily(
            "radium_pool_leases", "Live leases, by state and queue", labels=["state", "queue"]
        )
        live = Tally((lease.shown_state, lease.queue) for lease in state.leases.values())
        for (shown, queue), count in sorted(live.items()):
            leases.add_metric([shown, queue], count)
        yield leases

        up = GaugeMetricFamily(
            "radium_pool_acceptor_up",
            "1 when the acceptor is registered, heartbeating and following its assignments",
            labels=["acceptor"],
        )
        for name in sorted(state.acceptors):
            up.add_metric([name], 1.0 if pool.is_connected(name) else 0.0)
        yield up

        images = GaugeMetricFamily(
            "radium_pool_images", "Image pulls on acceptors, by state", labels=["state"]
        )
        for shown, count in sorted(Tally(s.state for s in pool.images.status.values()).items()):
            images.add_metric([shown], count)
        yield images
        yield from self._queues()

    def _queues(self) -> Iterator[Metric]:
        waiting = GaugeMetricFamily(
            "radium_pool_waiting_requests", "Requests waiting for capacity", labels=["queue"]
        )
        families = {
            name: GaugeMetricFamily(f"radium_pool_queue_{name}_gpus", text, labels=["queue"])
            for name, text in (
                ("deserved", "GPUs the queue is guaranteed (its deserved quota, in effect)"),
                ("allocated", "GPUs the queue's leases hold (its children's included)"),
                ("borrowed", "GPUs held beyond the deserved quota (preemptible, reclaimable)"),
                ("fair_share", "GPUs the queue would get now, sharing by weight"),
            )
        }
        for figures in self.pool.queue_figures():
            name = figures.queue.name
            if figures.waiting:
                waiting.add_metric([name], figures.waiting)
            for series, family in families.items():
                family.add_metric([name], getattr(figures, series))
        yield waiting
        yield from families.values()
