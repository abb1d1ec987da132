"""Worker limits on fixture cgroup roots (v1 and v2): files written, nested under our cgroup."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from radium.acceptor.devices import CpuBackend
from radium.acceptor.limits import Cgroups, Share
from radium.errors import SandboxError


def v1_root(tmp_path: Path) -> Cgroups:
    for controller in ("memory", "cpu"):
        (tmp_path / "fs" / controller / "job").mkdir(parents=True)
    proc = tmp_path / "cgroup"
    proc.write_text("5:memory:/job\n2:cpu,cpuacct:/job\n0::/\n")
    return Cgroups(str(tmp_path / "fs"), str(proc))


def test_v1_limits_nest_under_the_acceptor_cgroup(tmp_path: Path) -> None:
    cgroups = v1_root(tmp_path)
    applied = cgroups.apply("l-1", 4242, Share(memory_mib=64, cpus=0.25))
    assert applied == ["memory 64 MiB", "cpu 0.25"]
    memory = tmp_path / "fs/memory/job/radium-l-1"
    cpu = tmp_path / "fs/cpu/job/radium-l-1"
    assert (memory / "memory.limit_in_bytes").read_text() == str(64 << 20)
    assert (cpu / "cpu.cfs_quota_us").read_text() == "25000"
    assert (cpu / "cpu.cfs_period_us").read_text() == "100000"
    assert (memory / "cgroup.procs").read_text() == (cpu / "cgroup.procs").read_text() == "4242"


def test_v2_limits(tmp_path: Path) -> None:
    (tmp_path / "fs" / "job").mkdir(parents=True)
    (tmp_path / "fs" / "cgroup.controllers").write_text("cpu memory\n")
    proc = tmp_path / "cgroup"
    proc.write_text("0::/job\n")
    applied = Cgroups(str(tmp_path / "fs"), str(proc)).apply("l-2", 7, Share(128, 1.5))
    assert applied == ["memory 128 MiB", "cpu 1.5"]
    group = tmp_path / "fs/job/radium-l-2"
    assert (group / "memory.max").read_text() == str(128 << 20)
    assert (group / "cpu.max").read_text() == "150000 100000"


def test_no_share_touches_nothing_and_limits_that_cannot_be_set_fail(tmp_path: Path) -> None:
    cgroups = v1_root(tmp_path)
    assert cgroups.apply("l-3", 1, Share()) == []
    assert not (tmp_path / "fs/memory/job/radium-l-3").exists()
    missing = Cgroups(str(tmp_path / "nowhere"), str(tmp_path / "cgroup"))
    with pytest.raises(SandboxError, match="no cgroup hierarchy"):
        missing.apply("l-4", 1, Share(memory_mib=1))
    with pytest.raises(SandboxError, match="no cgroup hierarchy"):
        missing.check()


def test_check_names_the_missing_controller(tmp_path: Path) -> None:
    # v1 with memory and cpu but no pids hierarchy (as under a /sys some tool remounted).
    with pytest.raises(SandboxError, match="no pids controller") as caught:
        v1_root(tmp_path).check()
    assert "nsenter --net" in caught.value.hint
    # A v1 hierarchy whose cgroups lack the cap files (not a real cgroupfs here).
    (tmp_path / "fs/pids/job").mkdir(parents=True)
    (tmp_path / "cgroup").write_text("5:memory:/job\n2:cpu:/job\n3:pids:/job\n")
    with pytest.raises(SandboxError, match=r"no (memory|cpu|pids) controller in"):
        Cgroups(str(tmp_path / "fs"), str(tmp_path / "cgroup")).check()
    assert not list((tmp_path / "fs").glob("*/job/radium-check*"))


def test_cpu_backend_shares() -> None:
    backend = CpuBackend(2, 1024)
    assert backend.share(["cpu0", "cpu1"], 0.0, 0) == Share(0, 2.0)
    assert backend.share(["cpu0"], 0.5, 256) == Share(256, 0.5)


def test_kill_signals_only_what_is_really_in_the_lease_s_cgroup(tmp_path: Path) -> None:
    """A pid the cgroup's file lists but which is not in that cgroup (here: a fixture root; on
    a host, a pid reused since it was read) is never signalled: ending a lease must not kill
    another lease's process, whatever uid it runs as."""
    cgroups = v1_root(tmp_path)
    stranger = subprocess.Popen(["sleep", "600"])
    try:
        cgroups.apply("l-5", stranger.pid, Share(memory_mib=64))
        assert cgroups.kill("l-5", timeout=0.2) is False  # still listed: not done
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()
    assert cgroups.kill("l-none") is True  # no cgroup: nothing to kill


def v2_tree(tmp_path: Path, enabled: str, handed_down: str) -> tuple[Cgroups, Path]:
    """A v2 tree where this process's cgroup (``/svc``) holds pids 11 and 12."""
    own = tmp_path / "fs" / "svc"
    own.mkdir(parents=True)
    (tmp_path / "fs" / "cgroup.controllers").write_text("cpu memory pids\n")
    (own / "cgroup.controllers").write_text(handed_down)
    (own / "cgroup.subtree_control").write_text(enabled)
    (own / "cgroup.procs").write_text("11\n12\n")
    (tmp_path / "cgroup").write_text("0::/svc\n")
    return Cgroups(str(tmp_path / "fs"), str(tmp_path / "cgroup")), own


def test_v2_processes_move_to_a_leaf_so_the_controllers_reach_the_lease_cgroups(
    tmp_path: Path,
) -> None:
    # As a service's or a container command's cgroup: it holds processes, and no controller
    # is enabled for its children ("no internal processes" forbids both at once).
    cgroups, own = v2_tree(tmp_path, enabled="", handed_down="cpu memory pids\n")
    with pytest.raises(SandboxError, match="no memory controller in"):
        cgroups.check()  # a fake cgroupfs makes no memory.max: only the moves are checked
    # Both pids were written to the leaf (a fake file keeps the last), then the controllers
    # enabled for the children.
    assert (own / "acceptor" / "cgroup.procs").read_text() == "12"
    assert (own / "cgroup.subtree_control").read_text() == "+memory +cpu +pids"


def test_v2_nothing_moves_where_the_controllers_are_enabled_or_not_handed_down(
    tmp_path: Path,
) -> None:
    cgroups, own = v2_tree(
        tmp_path / "a", enabled="cpu memory pids\n", handed_down="cpu memory pids\n"
    )
    cgroups._delegate()
    assert not (own / "acceptor").exists()
    cgroups, own = v2_tree(tmp_path / "b", enabled="", handed_down="cpu\n")
    cgroups._delegate()  # check() then names the missing controller
    assert not (own / "acceptor").exists()
    assert (own / "cgroup.subtree_control").read_text() == ""
