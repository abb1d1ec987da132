"""Fractional leases under MPS: one uid per GPU, the MPS client environment every process of
the lease inherits, the pipe directory in its sandbox, whole GPUs bypassing MPS, and the pool
placing no fraction on a GPU that cannot share."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from radium.acceptor.gpu_sharing import Sharing
from radium.acceptor.record import SlotRecord
from radium.acceptor.sandbox import Sandbox
from radium.acceptor.slots import Slots
from radium.acceptor.uids import UidLocks
from radium.configtree import AcceptorConfig
from radium.errors import InvalidRequestError, UnavailableError
from radium.pool.core import scheduler
from radium.pool.model import AcceptorState, Device, DeviceState, Request
from radium.proto import pool_pb2 as pb
from tests.acceptor.mps_fixtures import backend, commands, config, install_control, short_dir


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """Short: the daemons' sockets are bound under it (pytest's own paths are too long)."""
    yield from short_dir()


@pytest.fixture
def settings(tmp_path: Path) -> AcceptorConfig:
    return config(tmp_path, install_control(tmp_path / "bin"))


@pytest.fixture
def slots(tmp_path: Path, settings: AcceptorConfig) -> Iterator[Slots]:
    gpus = backend(tmp_path)
    sharing = Sharing(settings, gpus.devices())
    sandbox = Sandbox(settings.sandbox)
    made = Slots(settings.state_dir, gpus, sandbox=sandbox, sharing=sharing)
    try:
        yield made
    finally:
        made.close()
        sharing.close()
        if made.uid_locks is not None:
            made.uid_locks.close()


def lease(lease_id: str, device: str = "0", fraction: float = 0.5, mib: int = 40960) -> pb.Lease:
    return pb.Lease(
        id=lease_id, device_ids=[device], fraction=fraction, memory_mib=mib, credential="c"
    )


def uid_of(slots: Slots, lease_id: str) -> int:
    record = slots.record(lease_id)
    assert record is not None
    return record.uid


def test_a_group_shares_one_uid_counted_until_its_last_lease(tmp_path: Path) -> None:
    locks = UidLocks(str(tmp_path / "uids"), 61000, 61099)
    try:
        first, second = locks.take("mps-0"), locks.take("mps-0")
        own = locks.take()
        assert first == second != own and locks.sharing(first) == 2 and locks.sharing(own) == 0
        assert locks.take("mps-1") not in (first, own)
        assert locks.release(first) is False and first in locks.held  # one lease still on it
        assert locks.release(first) is True and first not in locks.held
        again = locks.take("mps-0")  # the group starts over: counted from one
        assert locks.sharing(again) == 1 and again in locks.held
    finally:
        locks.close()


def test_a_restart_keeps_one_uid_for_the_group(tmp_path: Path) -> None:
    locks = UidLocks(str(tmp_path / "uids"), 61000, 61099)
    homes = [tmp_path / name for name in ("a", "b")]
    for home in homes:
        home.mkdir()
    try:
        assert locks.keep_for(61005, homes[0], "mps-0") == 61005
        assert locks.keep_for(61005, homes[1], "mps-0") == 61005
        assert locks.sharing(61005) == 2
        # A lease whose recorded uid is not the group's any more joins the group's.
        assert locks.keep_for(61007, homes[1], "mps-0") == 61005
    finally:
        locks.close()


def test_fractions_of_one_gpu_share_its_uid_and_whole_gpus_have_their_own(slots: Slots) -> None:
    for lease_id, device, fraction in (("a", "0", 0.5), ("b", "0", 0.25), ("c", "1", 0.5)):
        slots.prepare(lease(lease_id, device, fraction))
    slots.prepare(lease("whole", "1", 1.0))
    assert uid_of(slots, "a") == uid_of(slots, "b")
    assert len({uid_of(slots, "a"), uid_of(slots, "c"), uid_of(slots, "whole")}) == 3
    assert slots.sharing is not None and slots.uid_locks is not None
    pipe = slots.sharing.daemons["0"].pipe
    assert pipe.stat().st_uid == uid_of(slots, "a")  # its MPS server's uid reaches it
    # The GPU's last lease ends: its servers end, then the uid goes back to the host.
    server = int(slots.sharing.daemons["0"].ask(f"start_server -uid {uid_of(slots, 'a')}"))
    shared = uid_of(slots, "a")
    slots.teardown("a")
    assert shared in slots.uid_locks.held and pipe.stat().st_uid == shared
    slots.teardown("b")
    assert shared not in slots.uid_locks.held and pipe.stat().st_uid == 0
    assert f"shutdown_server {server}" in commands(slots.sharing, "0")
    assert slots.sharing.daemons["0"].servers() == []


def test_a_restarted_acceptor_keeps_the_gpu_s_shared_uid(
    slots: Slots, settings: AcceptorConfig
) -> None:
    slots.prepare(lease("a", "0", 0.5))
    slots.prepare(lease("b", "0", 0.25))
    shared = uid_of(slots, "a")
    assert slots.uid_locks is not None and slots.sharing is not None
    slots.uid_locks.close()  # as the acceptor's exit drops its locks
    pipe = slots.sharing.daemons["0"].pipe
    slots.sharing.daemons["0"].own(0)
    again = Slots(
        settings.state_dir, backend(), sandbox=Sandbox(settings.sandbox), sharing=slots.sharing
    )
    assert again.uid_locks is not None
    try:
        assert uid_of(again, "a") == uid_of(again, "b") == shared
        assert again.uid_locks.sharing(shared) == 2 and pipe.stat().st_uid == shared
    finally:
        again.uid_locks.close()
    slots.uid_locks = None  # closed above


def test_the_mps_environment_of_fractional_leases_only(slots: Slots) -> None:
    slots.prepare(lease("half", "0", 0.5, 40960))
    slots.prepare(lease("sliver", "0", 0.004, 300))
    slots.prepare(lease("whole", "1", 1.0, 81920))
    assert slots.sharing is not None
    pipe = str(slots.sharing.daemons["0"].pipe)
    half = tenant(slots, "half")
    assert half.env["CUDA_MPS_PIPE_DIRECTORY"] == pipe
    assert half.env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
    assert half.env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=40960M"
    assert half.env["CUDA_VISIBLE_DEVICES"] == "GPU-3f6030b9-a1e1-e569-82f4-fca1785843ac"
    assert half.binds == ((pipe, pipe),)
    assert tenant(slots, "sliver").env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "1"  # at least 1
    whole = tenant(slots, "whole")
    assert not any(name.startswith("CUDA_MPS") for name in whole.env) and whole.binds == ()


def tenant(slots: Slots, lease_id: str):  # type: ignore[no-untyped-def]
    record = slots.record(lease_id)
    assert isinstance(record, SlotRecord)
    return slots.launcher._tenant(record, slots.root / lease_id / "home")


#: Run as the lease's worker: a subprocess of it reports what it sees.
CHILD = (
    "import json, os\n"
    "pipe = os.environ['CUDA_MPS_PIPE_DIRECTORY']\n"
    "mps = {k: v for k, v in os.environ.items() if k.startswith('CUDA_MPS')}\n"
    "shm = sorted(os.listdir('/dev/shm'))\n"
    "print(json.dumps({'env': mps, 'pipe': sorted(os.listdir(pipe)), 'shm': shm,\n"
    "                  'uid': os.getuid()}))\n"
)
PARENT = f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {CHILD!r}], check=True)\n"


def test_a_subprocess_of_a_sandboxed_worker_has_the_limits_and_the_pipe(
    slots: Slots, tmp_path: Path
) -> None:
    slots.prepare(lease("half", "0", 0.5, 40960))
    half = tenant(slots, "half")
    assert slots.launcher.sandbox is not None
    read, write = os.pipe()
    keep_read, keep_write = os.pipe()  # stands for the control socket
    process = slots.launcher.sandbox.spawn(
        half, [sys.executable, "-c", PARENT], keep_write, lambda pid: None, write
    )
    os.close(write)
    with os.fdopen(read) as output:
        said = output.read()
    assert process.wait(timeout=60) == 0, said
    os.close(keep_read)
    os.close(keep_write)
    seen = json.loads(said.strip().splitlines()[-1])
    assert seen["env"] == {k: v for k, v in half.env.items() if k.startswith("CUDA_MPS")}
    assert "control" in seen["pipe"] and seen["uid"] == uid_of(slots, "half")
    assert seen["shm"] == []  # its /dev/shm stays its own


def test_a_fraction_is_refused_where_the_gpu_cannot_share(tmp_path: Path) -> None:
    settings = config(tmp_path, tmp_path / "absent")
    gpus = backend(tmp_path)
    slots = Slots(settings.state_dir, gpus, sharing=Sharing(settings, gpus.devices()))
    slots.grant(lease("half", "0", 0.5))
    with pytest.raises(UnavailableError, match="takes whole-GPU leases only"):
        slots.worker("half")
    assert slots.record("half") is None  # no slot, no uid
    slots.prepare(lease("whole", "0", 1.0))
    assert slots.record("whole") is not None


def gpu_acceptor(name: str, sharing: str) -> AcceptorState:
    device = Device("0", "nvidia", "H100", 81920, {"sharing": sharing, "uuid": f"GPU-{name}"})
    return AcceptorState(name, f"{name}:7401", {}, {"0": DeviceState(device)})


def test_the_pool_places_no_fraction_on_a_gpu_that_cannot_share() -> None:
    exclusive, mps = gpu_acceptor("plain", "exclusive"), gpu_acceptor("shared", "mps")
    assert scheduler.place(Request(fraction=0.5), [exclusive, mps]).acceptor == "shared"
    assert scheduler.place(Request(memory_mib=1024), [exclusive, mps]).acceptor == "shared"
    assert scheduler.place(Request(gpus=1), [exclusive]).acceptor == "plain"
    unenforced = gpu_acceptor("loose", "unenforced")
    assert scheduler.place(Request(fraction=0.5), [exclusive, unenforced]).acceptor == "loose"
    with pytest.raises(InvalidRequestError, match="take whole-GPU leases only"):
        scheduler.place(Request(fraction=0.5), [exclusive])


def test_the_pool_places_fractions_on_gpus_without_a_sharing_label() -> None:
    cpu = AcceptorState("c", "c:7401", {}, {"cpu0": DeviceState(Device("cpu0", "cpu", "x", 1024))})
    assert scheduler.place(Request(fraction=0.5), [cpu]).acceptor == "c"


def test_radium_gpus_shows_the_sharing_state(capsys: pytest.CaptureFixture[str]) -> None:
    from radium.commands import inspect

    device = pb.Device(id="0", vendor="nvidia", model="H100", memory_mib=81920)
    device.labels["sharing"] = "exclusive"
    status = pb.StatusResponse(devices=[pb.DeviceStatus(acceptor="gpu-1", device=device, up=True)])

    class Pool:
        def status(self) -> pb.StatusResponse:
            return status

    original = inspect.pool_client
    inspect.pool_client = Pool  # type: ignore[assignment]
    try:
        assert inspect._gpus(type("Args", (), {"json": False})()) == 0  # type: ignore[arg-type]
    finally:
        inspect.pool_client = original  # type: ignore[assignment]
    header, row = capsys.readouterr().out.splitlines()[:2]
    assert "SHARING" in header.split() and "exclusive" in row.split()


def test_the_stand_in_answers_like_the_real_client_without_a_daemon(tmp_path: Path) -> None:
    control = install_control(tmp_path / "bin")
    env = {"CUDA_MPS_PIPE_DIRECTORY": str(tmp_path / "none"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [str(control)], input=b"get_server_list\n", env=env, capture_output=True, timeout=30
    )
    assert done.returncode == 1 and b"Cannot find MPS control daemon" in done.stderr
