"""Worker uids locked host-wide: two acceptors (two UidLocks, two processes) never share one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from radium.acceptor.devices import CpuBackend
from radium.acceptor.sandbox import HostView, Sandbox
from radium.acceptor.slots import Slots
from radium.acceptor.uids import UidLocks, _host_uids
from radium.configtree import SandboxConfig
from radium.errors import SandboxError
from radium.proto import pool_pb2 as pb

FIRST = 250000  # within the default range, far from what another test's acceptor takes first

HOLDER = """
import sys, time
from radium.acceptor.uids import UidLocks
locks = UidLocks(sys.argv[1], int(sys.argv[2]), int(sys.argv[2]) + 9)
print(locks.take(), flush=True)
time.sleep(3600)
"""


def need_root() -> None:
    if os.geteuid() != 0:
        pytest.fail("this test needs root (it locks and chowns as an acceptor does)")


def test_two_acceptors_never_get_the_same_uid(tmp_path: Path) -> None:
    a, b = (
        UidLocks(str(tmp_path / "uids"), FIRST, FIRST + 9),
        UidLocks(str(tmp_path / "uids"), FIRST, FIRST + 9),
    )
    taken = [a.take(), b.take(), a.take(), b.take()]
    assert len(set(taken)) == 4
    a.release(taken[0])
    assert b.take() == taken[0]  # released: the host's again
    for _ in range(10 - 4):
        a.take()
    with pytest.raises(SandboxError, match="in use on this host"):
        b.take()
    a.close()
    b.close()


def test_a_dead_acceptor_s_uids_come_free(tmp_path: Path) -> None:
    """The lock is the acceptor process's open file: however it ends, the kernel drops it."""
    directory = str(tmp_path / "uids")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, directory, str(FIRST)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        held = int(holder.stdout.readline())
        ours = UidLocks(directory, FIRST, FIRST + 9)
        assert ours.take() != held  # while it lives, it holds its uid
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        assert held in {ours.take() for _ in range(9)}
        ours.close()
    finally:
        holder.kill()
        holder.wait()


def test_a_uid_a_process_runs_as_is_skipped(tmp_path: Path) -> None:
    need_root()
    process = subprocess.Popen(["sleep", "600"], user=FIRST, group=FIRST)
    try:
        assert FIRST in _host_uids()
        locks = UidLocks(str(tmp_path / "uids"), FIRST, FIRST + 9)
        assert locks.take() == FIRST + 1
        locks.close()
    finally:
        process.kill()
        process.wait()


def test_the_lock_directory_is_root_s_alone(tmp_path: Path) -> None:
    need_root()
    made = tmp_path / "made" / "uids"
    UidLocks(str(made), FIRST, FIRST).close()
    assert made.stat().st_mode & 0o777 == 0o700
    open_to_all = tmp_path / "open"
    open_to_all.mkdir(mode=0o777)
    open_to_all.chmod(0o777)
    with pytest.raises(SandboxError, match="refusing the uid lock directory") as refused:
        UidLocks(str(open_to_all), FIRST, FIRST)
    assert "uid_lock_dir" in refused.value.one_line()
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 65534, 65534)
    with pytest.raises(SandboxError, match="owned by uid 65534"):
        UidLocks(str(theirs), FIRST, FIRST)
    link = tmp_path / "link"
    link.symlink_to(made)
    with pytest.raises(SandboxError, match="cannot open the uid lock directory"):
        UidLocks(str(link), FIRST, FIRST)
    # A lock file planted as a link is not followed (and so cannot be locked).
    (made / f"{FIRST}.lock").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(SandboxError, match=f"cannot open worker uid {FIRST}'s lock"):
        UidLocks(str(made), FIRST, FIRST).take()


def sandboxed_slots(state: Path, locks: Path) -> Slots:
    """Slots with a sandbox (no worker is started here: bwrap is never run)."""
    config = SandboxConfig(uid_min=FIRST, uid_max=FIRST + 9, uid_lock_dir=str(locks))
    sandbox = Sandbox(config, HostView((), ()), bwrap="/bin/false", setpriv="/bin/false")
    return Slots(str(state), CpuBackend(2, 1024), sandbox=sandbox)


def lease(lease_id: str) -> pb.Lease:
    return pb.Lease(id=lease_id, device_ids=["cpu0"], credential="c", worker="process")


def uid_of(slots: Slots, lease_id: str) -> int:
    record = slots.record(lease_id)
    assert record is not None
    return record.uid


def test_slots_of_two_acceptors_and_a_restart(tmp_path: Path) -> None:
    need_root()
    locks = tmp_path / "uids"
    a = sandboxed_slots(tmp_path / "a", locks)
    b = sandboxed_slots(tmp_path / "b", locks)
    a.prepare(lease("l-a1"))
    b.prepare(lease("l-b1"))
    a.prepare(lease("l-a2"))
    uids = {uid_of(a, "l-a1"), uid_of(b, "l-b1"), uid_of(a, "l-a2")}
    assert len(uids) == 3
    kept = uid_of(a, "l-a1")
    (a.root / "l-a1" / "home" / "model.pt").write_bytes(b"weights")
    os.chown(a.root / "l-a1" / "home" / "model.pt", kept, kept)
    assert a.uid_locks is not None
    a.uid_locks.close()  # acceptor a dies: its locks go
    again = sandboxed_slots(tmp_path / "a", locks)  # and restarts: its slots keep their uids
    assert uid_of(again, "l-a1") == kept
    with pytest.raises(SandboxError, match="in use"):  # held again: nobody else gets it
        UidLocks(str(locks), kept, kept).take()
    b.teardown("l-b1")  # b's uid goes back to the host, and to b's next lease
    b.prepare(lease("l-b2"))
    assert uid_of(b, "l-b2") not in {uid_of(again, "l-a1"), uid_of(again, "l-a2")}


def test_a_restart_whose_uid_was_taken_meanwhile_moves_the_lease(tmp_path: Path) -> None:
    need_root()
    locks = tmp_path / "uids"
    a = sandboxed_slots(tmp_path / "a", locks)
    a.prepare(lease("l-1"))
    old = uid_of(a, "l-1")
    home = a.root / "l-1" / "home"
    (home / "data").mkdir()
    (home / "data" / "x").write_text("x")
    for path in (home / "data", home / "data" / "x"):
        os.chown(path, old, old)
    assert a.uid_locks is not None
    a.uid_locks.close()  # a is down ...
    other = UidLocks(str(locks), old, old)
    assert other.take() == old  # ... and another acceptor took its lease's uid
    again = sandboxed_slots(tmp_path / "a", locks)
    new = uid_of(again, "l-1")
    assert new != old and again.uids["l-1"] == new
    for path in (home, home / "data", home / "data" / "x"):
        assert (path.stat().st_uid, path.stat().st_gid) == (new, new)
    other.close()


class Engine:
    """A container runtime that holds every image and only records what is removed."""

    name = "fake"

    def __init__(self) -> None:
        self.removed: list[str] = []

    def pull(self, ref: str, progress: object) -> str:
        return "sha256:0"

    def digest(self, ref: str) -> str | None:
        return "sha256:0"

    def remove(self, ref: str) -> None:
        pass

    def run_container(self, name: str, image: str, command: list[str], **_: object) -> str:
        raise AssertionError("no worker starts here")

    def container_state(self, container: str) -> dict[str, object]:
        return {}

    def container_logs(self, container: str, lines: int = 20) -> str:
        return ""

    def remove_container(self, container: str) -> None:
        self.removed.append(container)


def test_a_container_worker_left_by_a_dead_acceptor_is_removed_by_name(tmp_path: Path) -> None:
    """Container-mode workers run as the lease's locked uid too; after a restart the acceptor
    holds no handle on one its earlier run left, and removes it by name (never kills by uid)."""
    need_root()
    locks = tmp_path / "uids"
    first = sandboxed_slots(tmp_path / "a", locks)
    granted = pb.Lease(id="l-c", device_ids=["cpu0"], credential="c", image="img:1")
    first.grant(granted)
    made = first._made("l-c")  # the slot, as make() makes it, without starting the worker
    record = made.record if made is not None else None
    assert record is not None and record.uid >= FIRST
    (first.root / "l-c" / "started").touch()  # its worker ran
    assert first.uid_locks is not None
    first.uid_locks.close()  # the acceptor dies
    again = sandboxed_slots(tmp_path / "a", locks)
    engine = Engine()
    again.launcher.containers = engine
    again.teardown("l-c")
    assert engine.removed == ["radium-worker-l-c"]
    assert again.uids == {}
    locks_now = UidLocks(str(locks), record.uid, record.uid)
    assert locks_now.take() == record.uid  # released with the lease
    locks_now.close()
