"""The ended log: read in the background (an etcd leader serves while it reads), leases that
end meanwhile are noted and none is forgotten, and once read the two are merged; and the pages
of a listing, served from it."""

from __future__ import annotations

import gc
import threading

import pytest

from radium.errors import StoreUnavailableError, UnavailableError
from radium.pool.model import Lease
from radium.pool.store.ended import EndedLog
from tests.pool.test_store_contract import lease


def ended(lease_id: str, at: float) -> Lease:
    return lease(lease_id, state="released", ended_at=at)


class GatedRead:
    """A store's read of its ended leases that returns only when let go."""

    def __init__(self, entries: list[tuple[float, str]]) -> None:
        self.leases = [ended(lease_id, at) for at, lease_id in entries]
        self.go = threading.Event()
        self.calls = 0

    def __call__(self) -> list[Lease]:
        self.calls += 1
        assert self.go.wait(10)
        return self.leases


def test_leases_that_end_while_the_log_is_read_are_noted_then_merged_and_trimmed() -> None:
    # l-3 ended as the read began: etcd holds it, and so do the notes.
    read = GatedRead([(1.0, "l-1"), (2.0, "l-2"), (3.0, "l-3")])
    log = EndedLog(read, kept=3)
    log.read_in_background()
    assert log.ended([ended("l-3", 3.0), ended("l-4", 4.0)]) == []  # the log is not read yet
    assert log.forget(ended_before=0.0) == []
    read.go.set()
    assert log.reading is not None
    log.reading.result(timeout=10)
    # Merged once (l-3 counted once): l-1..l-5, so the two oldest go.
    assert log.ended([ended("l-5", 5.0)]) == ["l-1", "l-2"]
    assert log.forget(ended_before=4.5) == ["l-3", "l-4"]
    assert log.reading is None and read.calls == 1


def test_a_read_that_failed_starts_again_at_the_next_prune() -> None:
    outcomes: list[object] = [StoreUnavailableError("etcd range failed"), [ended("l-1", 1.0)]]

    def read() -> list[Lease]:
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome  # type: ignore[return-value]

    log = EndedLog(read, kept=1)
    log.read_in_background()
    assert log.reading is not None
    assert log.reading.exception(timeout=10) is not None
    assert log.ended([ended("l-2", 2.0)]) == []  # failed: noted, nothing forgotten, no retry
    assert outcomes  # not read again by an ending lease
    assert log.forget(ended_before=0.0) == []  # the prune reads it again
    assert log.reading is not None
    log.reading.result(timeout=10)
    assert log.ended([ended("l-3", 3.0)]) == ["l-1", "l-2"]


def test_a_log_not_read_in_the_background_is_read_on_first_use() -> None:
    read = GatedRead([(1.0, "l-1")])
    read.go.set()
    log = EndedLog(read, kept=1)
    assert log.ended([ended("l-2", 2.0)]) == ["l-1"]
    assert log.reading is None and read.calls == 1


def test_a_log_over_its_bound_sheds_the_excess_a_little_per_change_and_prune() -> None:
    # A store written before the bound: ten ended, two kept.
    read = GatedRead([(float(n), f"l-{n}") for n in range(10)])
    read.go.set()
    log = EndedLog(read, kept=2, step=3, prune_most=4)
    assert log.ended([ended("l-10", 10.0)]) == ["l-0", "l-1", "l-2", "l-3"]  # 1 ended + 3
    assert log.forget(ended_before=0.0) == ["l-4", "l-5", "l-6", "l-7"]  # at most 4
    assert log.forget(ended_before=9.5) == ["l-8", "l-9"]  # past the retention, within 4
    assert log.ended([ended("l-11", 11.0), ended("l-12", 12.0)]) == ["l-10"]  # at the bound


def ids(leases: list[Lease]) -> list[str]:
    return [x.id for x in leases]


def test_a_listing_pages_through_the_ended_leases_newest_first_from_its_cursor() -> None:
    read = GatedRead([(float(n), f"l-{n}") for n in range(5)])
    read.go.set()
    log = EndedLog(read, kept=10)
    # Two end at one time, the later id first: the log keeps (time, id) order all the same.
    log.ended([ended("l-6b", 6.0), ended("l-6a", 6.0), ended("l-5", 5.0)])
    assert ids(log.newest(3)) == ["l-6b", "l-6a", "l-5"]
    assert ids(log.newest(3, before=(5.0, "l-5"))) == ["l-4", "l-3", "l-2"]
    log.ended([ended("l-7", 7.0)])  # a lease that ends between two pages shifts no page
    assert ids(log.newest(3, before=(2.0, "l-2"))) == ["l-1", "l-0"]
    assert log.forget(ended_before=1.5) == ["l-0", "l-1"]  # forgotten between pages: skipped
    assert ids(log.newest(3, before=(2.0, "l-2"))) == []
    assert ids(log.newest(1)) == ["l-7"]
    # A lease the log holds already is held once (it ends once).
    log.ended([ended("l-7", 7.0)])
    assert ids(log.newest(20)) == ["l-7", "l-6b", "l-6a", "l-5", "l-4", "l-3", "l-2"]


def test_a_listing_while_the_log_is_read_in_the_background_says_so() -> None:
    read = GatedRead([(1.0, "l-1")])
    log = EndedLog(read, kept=10)
    log.read_in_background()
    log.ended([ended("l-2", 2.0)])
    with pytest.raises(UnavailableError, match="still reading its ended leases"):
        log.newest(10)
    read.go.set()
    assert log.reading is not None
    log.reading.result(timeout=10)
    assert ids(log.newest(10)) == ["l-2", "l-1"]


def test_the_leases_it_holds_add_nothing_the_collector_walks() -> None:
    """Each full collection on the pool's loop walks every tracked object; 10,000 ended leases
    held as objects made each 2.5 to 3.7 ms longer. Held marshalled, they add none, and come
    back whole."""
    read = GatedRead([])
    read.go.set()
    log = EndedLog(read, kept=2_000)
    log.read()

    def ending() -> list[Lease]:
        return [
            lease(f"l-{n}", state="released", ended_at=float(n), devices={"0": 100, "1": n})
            for n in range(1_000)
        ]

    gc.collect()
    before = len(gc.get_objects())
    log.ended(ending())  # the pool drops its own references as they end
    gc.collect()
    assert len(gc.get_objects()) - before < 20
    assert log.newest(1_000) == ending()[::-1]
