from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from radium.acceptor.devices import CpuBackend
from radium.acceptor.slot_dir import STARTED
from radium.acceptor.slots import Slots
from radium.errors import LeaseNotFoundError
from radium.proto import pool_pb2 as pb


def lease(lease_id: str) -> pb.Lease:
    return pb.Lease(
        id=lease_id,
        device_ids=["cpu0"],
        fraction=0.5,
        memory_mib=512,
        credential="secret",
        holder="h",
    )


def test_prepare_reconcile_teardown(tmp_path: Path) -> None:
    slots = Slots(str(tmp_path))
    slots.prepare(lease("l-1"))
    slots.prepare(lease("l-2"))
    record = slots.root / "l-1" / "lease.json"
    assert json.loads(record.read_text())["credential"] == "secret"
    assert record.stat().st_mode & 0o777 == 0o600
    slots.reconcile([lease("l-2"), lease("l-3")])
    assert slots.active() == ["l-2", "l-3"]
    assert slots._on_disk() == ["l-2"]  # l-3's slot waits for its first connection
    slots.teardown("l-2")
    assert slots.active() == ["l-3"]
    with pytest.raises(ValueError, match="refusing lease id"):
        slots.prepare(lease("../../etc"))


def test_usage_of_a_real_worker_process(tmp_path: Path) -> None:
    slots = Slots(str(tmp_path))
    slots.prepare(lease("l-busy"))
    worker = subprocess.Popen([sys.executable, "-c", "x = bytearray(64 << 20)\nwhile True: pass"])
    try:
        # No started mark, as in a slot an older acceptor made: the pid alone gets it killed.
        (slots.root / "l-busy" / "worker.pid").write_text(str(worker.pid))
        slots.usage()  # psutil measures CPU between two calls
        time.sleep(0.5)
        (usage,) = slots.usage()
        assert usage.lease_id == "l-busy"
        assert usage.rss_bytes > 64 << 20
        assert usage.cpu_percent > 10
        slots.teardown("l-busy")
        assert worker.wait(timeout=10) != 0  # the slot's worker is killed with it
    finally:
        worker.kill()


def test_cpu_backend_devices() -> None:
    devices = CpuBackend(3, 2048).devices()
    assert [d.id for d in devices] == ["cpu0", "cpu1", "cpu2"]
    assert {d.memory_mib for d in devices} == {2048}
    assert CpuBackend(1, 1).visible_devices_env(["cpu0"]) == {"RADIUM_VISIBLE_DEVICES": "cpu0"}


def test_a_connection_may_come_before_its_grant(tmp_path: Path) -> None:
    slots = Slots(str(tmp_path))
    late = threading.Timer(0.2, slots.grant, [lease("l-late")])
    late.start()
    assert slots.credential("l-late", wait=30) == "secret"  # waited for the grant
    assert slots.credential("l-never", wait=0.1) is None
    assert slots.credential("../etc", wait=5) is None


def test_one_worker_per_lease_whoever_asks_first(tmp_path: Path) -> None:
    slots = Slots(str(tmp_path), CpuBackend(2, 1024))
    slots.prepare(lease("l-1"))
    held = slots.table["l-1"]  # as a data-plane thread holds it
    try:
        for _ in range(2):  # a live worker, then a dead one replaced: always one, shared
            with ThreadPoolExecutor(8) as pool:
                found = set(pool.map(lambda _: held.start(slots.launcher), range(8)))
            assert len(found) == 1 and found == {slots.workers["l-1"]}
            assert next(iter(found)).alive()
            slots.workers["l-1"].process.kill()  # type: ignore[union-attr]
            slots.workers["l-1"].process.wait()  # type: ignore[union-attr]
    finally:
        slots.teardown("l-1")
    with pytest.raises(LeaseNotFoundError):
        held.start(slots.launcher)  # torn down: no worker comes back for it
    with pytest.raises(LeaseNotFoundError):
        slots.worker("l-1")


def test_a_process_worker_starts_on_the_lease_s_first_connection(tmp_path: Path) -> None:
    slots = Slots(str(tmp_path), CpuBackend(2, 1024))
    slots.prepare(lease("l-1"))
    slot = slots.root / "l-1"
    assert slots.workers == {} and not (slot / STARTED).exists()  # a grant starts nothing
    ours, theirs = socket.socketpair()
    try:
        slots.hand_over("l-1", theirs, 5.0)
        worker = slots.workers["l-1"]
        assert worker.alive() and (slot / STARTED).exists()
    finally:
        slots.teardown("l-1")
        ours.close()
        theirs.close()
    assert not slot.exists() and not worker.alive()


def test_a_grant_makes_no_slot_until_the_lease_s_first_connection(tmp_path: Path) -> None:
    slots = Slots(str(tmp_path), CpuBackend(2, 1024))
    assert slots.grant(lease("l-1")) is False  # process mode: nothing to make now
    assert list(slots.root.iterdir()) == [] and slots.active() == ["l-1"]
    assert slots.credential("l-1") == "secret"  # the data plane authenticates from memory
    ours, theirs = socket.socketpair()
    try:
        slots.hand_over("l-1", theirs, 5.0)  # the first connection makes the slot and the worker
        assert slots.record("l-1") is not None and slots.workers["l-1"].alive()
        assert slots.revoke("l-1") is False  # a slot on disk: its teardown must follow
        assert slots.credential("l-1") == "secret"  # until the teardown, from its record
        slots.teardown("l-1")
    finally:
        ours.close()
        theirs.close()
    assert slots.active() == [] and slots.credential("l-1") is None


def test_a_grant_revoked_before_its_slot_was_made_makes_none(tmp_path: Path) -> None:
    slots = Slots(str(tmp_path), CpuBackend(2, 1024))
    container = pb.Lease(id="l-c", device_ids=["cpu0"], credential="c", image="alpine")
    assert slots.grant(container) is True  # a container worker's slot is made at once...
    assert slots.revoke("l-c") is True  # ...but the revocation came before that turn
    slots.make("l-c")
    assert slots.active() == [] and slots.workers == {} and list(slots.root.iterdir()) == []
    with pytest.raises(LeaseNotFoundError):
        slots.hand_over("l-c", socket.socket(), 5.0)  # a late connection makes nothing either
    assert list(slots.root.iterdir()) == []


class Told:
    """A live worker that records what it is told."""

    def __init__(self) -> None:
        self.notices: list[str] = []

    def alive(self) -> bool:
        return True

    def notify(self, text: str) -> None:
        self.notices.append(text)

    def stop(self) -> None:
        pass


def test_a_preempted_lease_s_worker_is_told_and_the_notice_kept(tmp_path: Path) -> None:
    slots = Slots(str(tmp_path))
    slots.prepare(lease("l-1"))
    slots.prepare(lease("l-2"))
    worker = Told()
    slots.table["l-1"].worker = worker  # type: ignore[assignment]
    preempted = pb.Lease(id="l-1", queue="a", preempted_for="b", preempted_at=5, expires_at=35)
    slots.preempt(preempted)
    expected = "lease l-1 of queue 'a' was preempted for queue 'b': save your work, its worker"
    assert len(worker.notices) == 1 and worker.notices[0].startswith(expected)
    assert (slots.root / "l-1" / "notice").read_text() == worker.notices[0]  # for a successor
    assert not (slots.root / "l-2" / "notice").exists()
    slots.teardown("l-1")
    slots.preempt(preempted)  # ended meanwhile: nothing to tell, no slot made again
    assert slots.active() == ["l-2"] and len(worker.notices) == 1
