"""The pool's series, read from a real PoolState through the Dispatcher the services use."""

from __future__ import annotations

import asyncio
import threading

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from radium.errors import CapacityError, InvalidRequestError, QuotaError
from radium.pool.api.metrics import PoolMetrics, on_loop, outcome
from radium.pool.core.dispatcher import Dispatcher
from radium.pool.model import Queue, Request
from tests.pool.test_queues import pool


def metered(*configured: Queue, gpus: int = 2) -> tuple[Dispatcher, CollectorRegistry]:
    registry = CollectorRegistry()
    served = Dispatcher(pool(*configured, gpus=gpus), clock=lambda: 1.0)
    served.observer = PoolMetrics(served, registry)
    return served, registry


def test_device_lease_and_queue_series_follow_the_state() -> None:
    served, registry = metered(Queue("a", deserved=1), gpus=2)
    value = registry.get_sample_value
    device = {"acceptor": "a", "device": "0"}
    assert value("radium_pool_device_allocated_ratio", device) == 0.0
    half = served.grant(Request(fraction=0.5, queue="a", holder="n/c1"))
    whole = served.grant(Request(gpus=1, queue="a", holder="n/c2"))
    ratios = {
        d: value("radium_pool_device_allocated_ratio", {"acceptor": "a", "device": d})
        for d in ("0", "1")
    }
    assert sorted(ratios.values()) == [0.5, 1.0]
    assert value("radium_pool_leases", {"state": "active", "queue": "a"}) == 2
    assert value("radium_pool_queue_allocated_gpus", {"queue": "a"}) == 1.5
    assert value("radium_pool_queue_deserved_gpus", {"queue": "a"}) == 1.0
    assert value("radium_pool_queue_borrowed_gpus", {"queue": "a"}) == 0.5
    assert value("radium_pool_acceptor_up", {"acceptor": "a"}) == 0.0  # no watch stream
    for lease in (half, whole):
        served.ended([served.state.release(lease.id, 2.0)])  # type: ignore[list-item]
    assert value("radium_pool_leases", {"state": "active", "queue": "a"}) is None
    assert value("radium_pool_leases_ended_total", {"state": "released"}) == 2
    assert all(
        value("radium_pool_device_allocated_ratio", {"acceptor": "a", "device": d}) == 0.0
        for d in ("0", "1")
    )
    assert b"radium_pool_allocation_duration_seconds_bucket" in generate_latest(registry)


@pytest.mark.parametrize(
    "error, waited, expected",
    [
        (None, False, "granted"),
        (CapacityError("full"), False, "no_capacity"),
        (CapacityError("full"), True, "timed_out"),
        (QuotaError("over"), True, "over_quota"),
        (InvalidRequestError("bad"), False, "invalid_argument"),
        (asyncio.CancelledError(), True, "cancelled"),
        (RuntimeError("bug"), False, "internal"),
    ],
)
def test_allocation_outcomes(error: BaseException | None, waited: bool, expected: str) -> None:
    assert outcome(error, waited) == expected


def test_a_scrape_reads_the_state_on_the_pool_s_loop() -> None:
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()
    try:
        seen: list[threading.Thread] = []
        call = on_loop(loop)
        assert call(lambda: seen.append(threading.current_thread()) or 7) == 7
        assert seen == [runner]
        with pytest.raises(ZeroDivisionError):
            call(lambda: 1 // 0)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        runner.join()
        loop.close()
