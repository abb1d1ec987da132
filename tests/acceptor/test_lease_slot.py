"""A lease's life on the acceptor as a state machine: every move it has, none it has not, and the
slots' operations moving it (acceptor/lease_slot.py)."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

import pytest

from radium.acceptor.devices import CpuBackend
from radium.acceptor.lease_slot import LeaseSlot, State
from radium.acceptor.slot_dir import STARTED
from radium.acceptor.slots import Slots
from radium.errors import InternalError, LeaseNotFoundError
from radium.proto import pool_pb2 as pb

G, M, S, E = State.GRANTED, State.MADE, State.STARTED, State.ENDED
#: Written out here, not read from the module: the test is what the life must be.
LIFE = {G: {M, E}, M: {S, E}, S: {S, E}, E: set()}


def lease(lease_id: str) -> pb.Lease:
    return pb.Lease(id=lease_id, device_ids=["cpu0"], fraction=0.5, credential="secret")


@pytest.mark.parametrize(("start", "to"), list(itertools.product(State, State)))
def test_every_move_is_taken_or_refused_as_the_life_has_it(
    tmp_path: Path, start: State, to: State
) -> None:
    slot = LeaseSlot("l-1", tmp_path, threading.Lock(), start)
    if to in LIFE[start]:
        slot.transition(to)
        assert slot.state is to
    else:
        with pytest.raises(InternalError, match=f"a {start.value} slot cannot become {to.value}"):
            slot.transition(to)
        assert slot.state is start


def test_a_lease_s_life_through_the_slots(tmp_path: Path) -> None:
    slots = Slots(str(tmp_path), CpuBackend(2, 1024))
    assert slots.grant(lease("l-1")) is False  # a process-mode worker waits for its first call
    held = slots.table["l-1"]
    assert held.state is G and not (slots.root / "l-1").exists()
    try:
        worker = slots.worker("l-1")
        assert held.state is S and held.worker is worker and worker.alive()
        assert (slots.root / "l-1" / STARTED).exists() and held.uid is not None
        assert slots.revoke("l-1") is False  # a slot was made: its teardown follows
        assert held.lease is None and held.state is S
    finally:
        slots.teardown("l-1")
    assert held.state is E and held.worker is None and "l-1" not in slots.table
    assert not (slots.root / "l-1").exists() and not worker.alive()


def test_a_grant_revoked_before_its_slot_is_made_ends_without_one(tmp_path: Path) -> None:
    slots = Slots(str(tmp_path), CpuBackend(2, 1024))
    slots.grant(lease("l-1"))
    held = slots.table["l-1"]
    assert slots.revoke("l-1") is True  # nothing to tear down
    assert held.state is E and slots.table == {}
    with pytest.raises(LeaseNotFoundError):
        slots.worker("l-1")  # a connection that comes after the revocation
    slots.preempt(lease("l-1"))  # nor does a late notice make it again
    assert slots.active() == [] and list(slots.root.iterdir()) == []


def test_a_restart_takes_each_slot_back_in_its_state(tmp_path: Path) -> None:
    first = Slots(str(tmp_path))
    first.prepare(lease("l-made"))
    first.prepare(lease("l-ran"))
    (first.root / "l-ran" / STARTED).touch()  # its worker ran before the acceptor died
    (first.root / "l-half").mkdir()  # made, but its record never written
    again = Slots(str(tmp_path))
    assert {i: s.state for i, s in again.table.items()} == {"l-made": M, "l-ran": S}
    assert all(s.lease is None for s in again.table.values())  # until the pool lists them
    assert again.credential("l-ran") == "secret"  # from its record, the pool out of reach
    again.reconcile([lease("l-ran")])
    assert again.active() == ["l-ran"] and again.table["l-ran"].lease is not None
