"""One MPS control daemon per GPU (acceptor/mps.py, acceptor/gpu_sharing.py), driven through
a stand-in for ``nvidia-cuda-mps-control`` (tests/acceptor/fake_mps_control.py)."""

from __future__ import annotations

import logging
import os
import signal
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from radium.acceptor.daemon import Acceptor
from radium.acceptor.gpu_sharing import Sharing
from radium.acceptor.mps import PID_FILE, Daemon, find_control
from radium.configtree import SandboxConfig
from radium.errors import UnavailableError
from radium.proto import pool_pb2 as pb
from tests.acceptor.mps_fixtures import (
    UUIDS,
    backend,
    commands,
    config,
    install_control,
    running,
    short_dir,
)


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """Short: the daemons' sockets are bound under it (pytest's own paths are too long)."""
    yield from short_dir()


@pytest.fixture
def control(tmp_path: Path) -> Path:
    return install_control(tmp_path / "bin")


def test_the_control_binary_is_the_configured_one_or_found_on_the_path(tmp_path: Path) -> None:
    path = install_control(tmp_path / "bin")
    assert find_control("", str(tmp_path / "bin")) == str(path)
    assert find_control(str(path)) == str(path)
    assert find_control(str(tmp_path / "nowhere")) is None
    assert find_control("", str(tmp_path / "empty")) is None  # nor in /usr/local/nvidia/bin


def test_a_daemon_per_gpu_on_its_gpu_with_its_own_directories(
    tmp_path: Path, control: Path
) -> None:
    sharing = Sharing(config(tmp_path, control), backend(tmp_path).devices())
    try:
        assert sharing.state == {"0": "mps", "1": "mps"}
        for device_id, uuid in zip(("0", "1"), UUIDS):
            daemon = sharing.daemons[device_id]
            assert commands(sharing, device_id)[0] == f"start CUDA_VISIBLE_DEVICES={uuid}"
            assert daemon.pipe == tmp_path / "mps" / uuid / "pipe"
            assert (daemon.pipe / PID_FILE).read_text().strip() == str(daemon.pid)
            assert stat.S_ISSOCK((daemon.pipe / "control").stat().st_mode)
            for directory in (daemon.pipe, daemon.log):  # root's alone until a lease shares
                info = directory.stat()
                assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (0, 0o700)
            assert stat.S_IMODE(daemon.root.stat().st_mode) == 0o711
            assert daemon.servers() == []  # the health check answers
        labels = [d.labels["sharing"] for d in sharing.labelled(backend(tmp_path).devices())]
        assert labels == ["mps", "mps"]
    finally:
        pids = [d.pid for d in sharing.daemons.values()]
        sharing.close()
    assert "quit" in commands(sharing, "0")
    assert pids and not any(running(pid) for pid in pids if pid)


def test_a_killed_daemon_is_started_again_and_a_failing_one_waits_longer(
    tmp_path: Path, control: Path
) -> None:
    sharing = Sharing(config(tmp_path, control), backend(tmp_path).devices()[:1])
    daemon = sharing.daemons["0"]
    try:
        first = daemon.pid
        assert first is not None
        sharing.check()
        assert daemon.pid == first  # healthy: left alone
        os.kill(first, signal.SIGKILL)
        sharing.check()
        assert daemon.pid != first and daemon.alive()
        assert [c for c in commands(sharing, "0") if c.startswith("start")] == [
            f"start CUDA_VISIBLE_DEVICES={UUIDS[0]}"
        ] * 2
        # A daemon that cannot start again is retried later, each time later.
        os.kill(daemon.pid or 0, signal.SIGKILL)
        saved = control.read_text()
        control.write_text("#!/bin/sh\necho broken >&2\nexit 3\n")
        sharing.check(now=1000.0)
        assert sharing.retry["0"] == (1001.0, 1.0)
        sharing.check(now=1000.5)  # not yet
        assert sharing.retry["0"] == (1001.0, 1.0)
        sharing.check(now=1001.0)
        assert sharing.retry["0"] == (1003.0, 2.0)
        control.write_text(saved)
        sharing.check(now=1003.0)
        assert "0" not in sharing.retry and daemon.alive()
    finally:
        sharing.close()
    assert not running(daemon.pid or 0)


def test_servers_are_shut_down_and_nothing_outlives_stop(tmp_path: Path, control: Path) -> None:
    daemon = Daemon(UUIDS[0], str(control), tmp_path / "mps" / UUIDS[0])
    daemon.start()
    servers = [int(daemon.ask(f"start_server -uid {uid}")) for uid in (61000, 61001)]
    assert sorted(daemon.servers()) == sorted(servers)
    daemon.shutdown_servers()
    assert daemon.servers() == [] and not any(map(running, servers))
    server = int(daemon.ask("start_server -uid 61000"))
    pid = daemon.pid
    daemon.stop()
    assert not running(server) and not running(pid or 0)
    assert not (daemon.pipe / PID_FILE).exists()


def test_a_daemon_left_by_an_earlier_run_is_stopped_first(tmp_path: Path, control: Path) -> None:
    earlier = Daemon(UUIDS[0], str(control), tmp_path / "mps" / UUIDS[0])
    earlier.start()
    again = Daemon(UUIDS[0], str(control), tmp_path / "mps" / UUIDS[0])
    again.start()
    try:
        assert not running(earlier.pid or 0) and again.alive()
    finally:
        again.stop()


def test_without_the_binary_one_line_and_whole_gpus_only(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "radium.acceptor.gpu_sharing"):
        sharing = Sharing(config(tmp_path, tmp_path / "absent"), backend(tmp_path).devices())
    (line,) = [r.getMessage() for r in caplog.records]
    assert "NVIDIA MPS is not available" in line and str(tmp_path / "absent") in line
    assert 'gpu_sharing = "unenforced"' in line and "acceptor.mps_control" in line
    assert sharing.state == {"0": "exclusive", "1": "exclusive"} and not sharing.daemons
    labels = [d.labels["sharing"] for d in sharing.labelled(backend(tmp_path).devices())]
    assert labels == ["exclusive", "exclusive"]
    later = pb.Device(id="7", vendor="nvidia")  # healthy only after the start: no daemon
    assert sharing.labelled([later])[0].labels["sharing"] == "exclusive"
    assert sharing.group(["0"], 1.0) == ""  # a whole GPU: served
    with pytest.raises(UnavailableError, match="GPU 0 of this acceptor takes whole-GPU leases"):
        sharing.group(["0"], 0.5, "l-half")
    assert sharing.env(["0"], 0.5, 4096) == {}


def test_a_daemon_that_fails_to_start_refuses_fractions_on_its_gpu(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken = tmp_path / "bin" / "nvidia-cuda-mps-control"
    broken.parent.mkdir()
    broken.write_text("#!/bin/sh\necho 'cannot open the GPU' >&2\nexit 1\n")
    broken.chmod(0o755)
    with caplog.at_level(logging.WARNING, "radium.acceptor.gpu_sharing"):
        sharing = Sharing(config(tmp_path, broken), backend(tmp_path).devices()[:1])
    (line,) = [r.getMessage() for r in caplog.records]
    assert "does not start on GPU 0" in line and "cannot open the GPU" in line
    assert sharing.state == {"0": "exclusive"}


def test_unenforced_allows_fractions_without_mps(tmp_path: Path) -> None:
    settings = config(tmp_path, tmp_path / "absent", gpu_sharing="unenforced")
    sharing = Sharing(settings, backend(tmp_path).devices())
    assert sharing.state == {"0": "unenforced", "1": "unenforced"} and not sharing.daemons
    assert sharing.group(["1"], 0.25) == ""  # a uid of its own
    assert sharing.env(["1"], 0.25, 2048) == {"RADIUM_GPU_SHARING": "unenforced"}
    labels = [d.labels["sharing"] for d in sharing.labelled(backend(tmp_path).devices())]
    assert labels == ["unenforced", "unenforced"]


def test_cpu_devices_are_not_labelled_and_start_no_daemon(tmp_path: Path, control: Path) -> None:
    from radium.acceptor.devices import CpuBackend

    devices = CpuBackend(2, 1024).devices()
    sharing = Sharing(config(tmp_path, control), devices)
    assert not sharing.daemons and sharing.group(["cpu0"], 0.5) == ""
    assert all("sharing" not in d.labels for d in sharing.labelled(devices))


def test_the_acceptor_registers_the_sharing_label_and_leaves_nothing_running(
    tmp_path: Path, control: Path
) -> None:
    settings = config(tmp_path, control, sandbox=SandboxConfig(enabled=False))
    acceptor = Acceptor(settings, backend(tmp_path))
    try:
        assert [d.labels["sharing"] for d in acceptor.info().devices] == ["mps", "mps"]
        daemons = [d.pid or 0 for d in acceptor.sharing.daemons.values()]
        server = int(acceptor.sharing.daemons["0"].ask("start_server -uid 61000"))
    finally:
        acceptor.slots.close()
        acceptor.sharing.close()  # as serve() ends
    assert all(daemons) and not any(map(running, [*daemons, server]))


def test_a_pipe_directory_too_long_for_its_sockets_is_refused(tmp_path: Path) -> None:
    daemon = Daemon(UUIDS[0], "/bin/false", tmp_path / ("x" * 80) / UUIDS[0])
    with pytest.raises(UnavailableError, match="too long for its sockets"):
        daemon.start()


def test_a_pipe_directory_other_users_cannot_reach_is_refused_before_the_daemon(
    tmp_path: Path, control: Path
) -> None:
    # Under a 0700 directory the GPU's worker uid cannot reach the pipe: its clients would
    # fail at their first CUDA call ("MPS client failed to connect", error 805).
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    daemon = Daemon(UUIDS[0], str(control), closed / "mps" / UUIDS[0])
    with pytest.raises(UnavailableError, match=f"{closed} is not searchable by other users"):
        daemon.start()
    assert daemon.pid is None and not (daemon.pipe / PID_FILE).exists()
