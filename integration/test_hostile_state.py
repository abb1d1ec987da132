"""Issue 34, holes 7 and 9, tried as an attacker would, against real processes:

- a local user pre-creates `radium up`'s state directory (under the sticky /tmp, where the
  README's quickstart puts it) with `config.toml` a link to a file of theirs, and waits for
  root to run `radium up` there;
- a token holder opens the lease stream and sends calls without reading a reply, again and
  again, while another client of the same pool allocates and releases.

Each probe also runs once against the old behaviour (the old config writer; the pool started
with its window made too wide to matter) to show that it catches the hole."""

from __future__ import annotations

import asyncio
import os
import pwd
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import grpc.aio
import psutil
import pytest

from integration.host import need_root
from integration.pool import AGENT_TOKEN, PoolCluster
from radium import rpc
from radium.leaseclient.calls import WINDOW
from radium.leaseclient.stream import LeaseStream
from radium.proto import pool_pb2 as pb
from radium.proto import pool_pb2_grpc as pb_grpc
from tests.ports import free_port

CLI = str(Path(sys.executable).parent / "radium")


def free_uid() -> int:
    """A uid no user of this machine has: the attacker (a user need not exist to own files)."""
    for uid in range(54321, 64000):
        try:
            pwd.getpwuid(uid)
        except KeyError:
            return uid
    raise AssertionError("no free uid for the attacker")


def radium(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CLI, *argv], capture_output=True, text=True, timeout=120, env={"PATH": os.environ["PATH"]}
    )


def up(state: Path) -> subprocess.CompletedProcess[str]:
    listen = f"127.0.0.1:{free_port()}"
    return radium("up", "--detach", "--state-dir", str(state), "--listen", listen)


def processes_of(state: Path) -> list[int]:
    """Radium processes started for ``state`` still running."""
    found = []
    for process in psutil.process_iter():
        try:
            if str(state) in process.environ().get("RADIUM_CONFIG", ""):
                found.append(process.pid)
        except psutil.Error:
            continue
    return found


@dataclass
class Planted:
    """The attacker's state directory, and the file of theirs its config.toml links to."""

    state: Path
    loot: Path
    uid: int


@pytest.fixture
def planted() -> Iterator[Planted]:
    """What a local user leaves in /tmp for root's `radium up --state-dir`."""
    need_root()
    uid = free_uid()
    state = Path(tempfile.mkdtemp(prefix="radium-quickstart-", dir="/tmp"))
    loot_fd, loot_name = tempfile.mkstemp(prefix="rdm-loot-", dir="/tmp")
    os.close(loot_fd)
    loot = Path(loot_name)
    try:
        os.chown(loot, uid, uid)
        loot.chmod(0o644)
        state.chmod(0o755)
        os.chown(state, uid, uid)
        (state / "config.toml").symlink_to(loot)
        os.lchown(state / "config.toml", uid, uid)
        yield Planted(state, loot, uid)
    finally:
        for pid in processes_of(state):  # only if the probe failed
            psutil.Process(pid).kill()
        subprocess.run(["rm", "-rf", str(state), str(loot)], check=True)


def old_write_config(state: Path) -> None:
    """How `radium up` wrote its config before issue 34 (radium/up.py, its lines that touch
    the directory and the file): through whatever ``config.toml`` is."""
    state.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = state / "config.toml"
    text = (
        f'[pool]\nagent_tokens = ["{secrets.token_urlsafe(24)}"]\n'
        f'acceptor_tokens = ["{secrets.token_urlsafe(24)}"]\n'
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


@pytest.mark.parametrize("writer", ["radium-up", "old-writer"])
def test_a_state_directory_planted_by_another_user_gets_no_token(
    planted: Planted, writer: str
) -> None:
    state = planted.state
    if writer == "old-writer":  # the hole: root writes the tokens into the attacker's file
        old_write_config(state)
        assert "agent_tokens" in planted.loot.read_text()
        return
    done = up(state)
    line = (
        f"radium: state directory {state} is owned by uid {planted.uid}, not root; "
        "remove it or choose another --state-dir"
    )
    assert (done.returncode, done.stdout, done.stderr.splitlines()) == (1, "", [line])
    assert radium("down", "--state-dir", str(state)).stderr.splitlines() == [line]
    assert planted.loot.read_text() == ""  # no token reached the attacker's file
    assert sorted(p.name for p in state.iterdir()) == ["config.toml"]  # nothing written
    assert processes_of(state) == []


def test_the_quickstart_state_directory_works_absent_and_from_a_previous_run() -> None:
    need_root()
    state = Path(tempfile.mkdtemp(prefix="radium-quickstart-", dir="/tmp"))
    state.rmdir()  # absent, as before the README's first `radium up`
    try:
        for run in ("absent", "present from the previous run"):
            done = up(state)
            assert done.returncode == 0, f"{run}: {done.stderr}"
            assert done.stdout.startswith("Radium is up"), done.stdout
            assert (state.stat().st_uid, state.stat().st_mode & 0o777) == (0, 0o700)
            config = (state / "config.toml").stat()
            assert (config.st_uid, config.st_mode & 0o777) == (0, 0o600)
            stopped = radium("down", "--state-dir", str(state))
            assert stopped.returncode == 0, stopped.stderr
            assert processes_of(state) == []
    finally:
        for pid in processes_of(state):
            psutil.Process(pid).kill()
        subprocess.run(["rm", "-rf", str(state)], check=True)


#: The pool of the old behaviour: its window so wide that nothing a client sends passes it.
OLD_POOL = (
    "import sys, radium.leaseclient.calls as calls; calls.WINDOW = 1 << 40; "
    "from radium.cli import main; sys.exit(main(['pool', 'serve']))"
)
#: Calls the attacker sends in all, in messages of 256 (none of them ever read).
FLOOD = 120_000
#: The lease each names: the pool's reply repeats it ("lease … is not active"), so each reply
#: the pool holds is about a KiB.
NOPE = "n" * 1000


def high_water_mib(pid: int) -> float:
    """The process's peak resident memory (VmHWM), MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmHWM for pid {pid}")


def keep_alives(first: int, count: int) -> pb.LeaseCall:
    """``count`` keep-alives of a lease that does not exist, as one message."""
    calls = [pb.LeaseCall(id=n, keep_alive=pb.LeaseRef(lease_id=NOPE)) for n in range(count)]
    for n, call in enumerate(calls):
        call.id = first + n
    calls[0].more.extend(calls[1:])
    return calls[0]


@dataclass
class Outcome:
    status: tuple[grpc.StatusCode, str]  # how a stream one message past the window ended
    grown_mib: float  # the pool's peak memory, after the flood less before it
    streams: int  # streams the flood took
    cycles: int  # the other client's allocate + release cycles meanwhile


async def past_the_window(stub: pb_grpc.PoolStub) -> tuple[grpc.StatusCode, str]:
    """One message of WINDOW + 1 calls, sent before any reply is read; how its stream ended
    (the old pool answers them all: the stream is then cancelled)."""
    stream = stub.Leases(metadata=rpc.metadata(AGENT_TOKEN))
    await stream.initial_metadata()
    await stream.write(keep_alives(1, WINDOW + 1))
    answered = 0
    try:
        while answered <= WINDOW and (message := await stream.read()) is not grpc.aio.EOF:
            answered += 1 + len(message.more)
    except grpc.RpcError:
        pass
    if answered > WINDOW:
        stream.cancel()
    return await stream.code(), await stream.details()


async def flood(stub: pb_grpc.PoolStub) -> int:
    """FLOOD calls, no reply read; a stream the pool ends is opened again. The streams used.
    The last is cancelled once all are sent: the pool has read them (its reading is what lets
    a write finish), so it holds then every reply it could not send."""
    sent, streams = 0, 0
    while sent < FLOOD:
        stream = stub.Leases(metadata=rpc.metadata(AGENT_TOKEN))
        streams += 1
        await stream.initial_metadata()
        try:
            while sent < FLOOD:
                await stream.write(keep_alives(sent + 1, 256))
                sent += 256
        except (grpc.RpcError, asyncio.InvalidStateError):
            continue  # ended by the pool: the attacker tries again
        stream.cancel()
    return streams


async def attack(cluster: PoolCluster) -> Outcome:
    assert cluster.pool.process is not None
    pid = cluster.pool.process.pid
    attacker = rpc.aio_channel(cluster.address, None)
    channel = rpc.aio_channel(cluster.address, None)
    legit = LeaseStream(channel, rpc.metadata(AGENT_TOKEN), "pool")
    await legit.release((await legit.allocate(pb.AllocateRequest(gpus=1, holder="l"))).id)
    stub = pb_grpc.PoolStub(attacker)
    status = await past_the_window(stub)
    before = high_water_mib(pid)
    cycles, stop = 0, asyncio.Event()

    async def keep_leasing() -> None:
        nonlocal cycles
        while not stop.is_set():
            lease = await legit.allocate(pb.AllocateRequest(gpus=1, holder="legit"))
            assert await legit.release(lease.id) is True
            cycles += 1

    leasing = asyncio.ensure_future(keep_leasing())
    try:
        streams = await flood(stub)
    finally:
        stop.set()
        await leasing  # raises what the legitimate client met, if anything
    grown = high_water_mib(pid) - before
    await legit.close()
    await channel.close()
    await attacker.close()
    return Outcome(status, grown, streams, cycles)


@pytest.mark.parametrize("pool", ["window", "old-unbounded"])
def test_an_unread_lease_stream_is_ended_and_the_pool_stays_small(
    tmp_path: Path, pool: str
) -> None:
    cluster = PoolCluster(tmp_path, lease_ttl=30)
    if pool == "old-unbounded":
        cluster.pool.argv = [sys.executable, "-c", OLD_POOL]
    try:
        cluster.start_pool()
        cluster.start_acceptor("acc", devices=2)
        cluster.wait_up("acc")
        outcome = asyncio.run(attack(cluster))
        log = cluster.pool.log.read_text()
    finally:
        cluster.stop()
    print(f"{pool}: {outcome}")  # the probe table's numbers (pytest -s)
    assert outcome.cycles > 0  # the other client leased throughout, and never failed
    if pool == "old-unbounded":  # the hole: every reply queued, the pool grows with the flood
        assert outcome.status[0] == grpc.StatusCode.CANCELLED
        assert outcome.streams == 1
        assert outcome.grown_mib > 128
        return
    limit = f"over the limit of {WINDOW} a stream may have in flight"
    assert outcome.status[0] == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert f"{WINDOW + 1} calls unanswered, {limit}" in outcome.status[1]
    assert outcome.streams > 1  # each ended by the pool, well before the flood's end
    assert outcome.grown_mib < 48  # the window's replies and grpc's buffers, however long
    assert log.count(f"{limit}; a client waits") >= outcome.streams
