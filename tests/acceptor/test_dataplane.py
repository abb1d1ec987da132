"""The acceptor's data plane: handshake before anything, one worker per lease, pinned devices."""

from __future__ import annotations

import contextlib
import errno
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from radium.acceptor.dataplane import DataPlane, split_address
from radium.acceptor.devices import CpuBackend
from radium.acceptor.handshakes import Table
from radium.acceptor.slots import Slots
from radium.errors import ConfigError
from radium.proto import pool_pb2 as pb
from radium_interposer import handshake, wire
from tests.interposer.harness import BARE_PYTHON, INTERPOSER
from tests.ports import free_port


@pytest.fixture
def plane(tmp_path: Path) -> Iterator[DataPlane]:
    slots = Slots(str(tmp_path), CpuBackend(2, 1024))
    for lease_id, device in (("lease-a", "cpu0"), ("lease-b", "cpu1")):
        slots.prepare(pb.Lease(id=lease_id, device_ids=[device], credential=f"{lease_id}-secret"))
    dp = DataPlane(f"127.0.0.1:{free_port()}", slots)
    dp.start()
    try:
        yield dp
    finally:
        dp.stop()
        slots.close()


def closed_by_peer(sock: socket.socket) -> bool:
    """The acceptor closed the connection (a reset when our bytes were left unread)."""
    try:
        return sock.recv(65536) == b""
    except ConnectionResetError:
        return True


def client_env(plane: DataPlane, lease: str, credential: str) -> dict[str, str]:
    return {
        "PYTHONPATH": INTERPOSER,
        "RADIUM_DP_DIRECT": plane.address,
        "RADIUM_LEASE": lease,
        "RADIUM_LEASE_CREDENTIAL": credential,
        "RADIUM_REMOTE": "numpy,subprocess",
    }


def run_client(plane: DataPlane, lease: str, credential: str, code: str) -> str:
    done = subprocess.run(
        [BARE_PYTHON, "-c", "import radium_interposer.boot\n" + code],
        env=client_env(plane, lease, credential),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_each_lease_has_its_own_pinned_worker(plane: DataPlane) -> None:
    # subprocess is remoted: the command runs as a child of the lease's worker.
    code = (
        "import subprocess\n"
        "cmd = 'echo $RADIUM_VISIBLE_DEVICES $RADIUM_LEASE_ID $PPID'\n"
        "print(subprocess.check_output(['sh', '-c', cmd]).decode())"
    )
    a = run_client(plane, "lease-a", "lease-a-secret", code).split()
    b = run_client(plane, "lease-b", "lease-b-secret", code).split()
    assert a[:2] == ["cpu0", "lease-a"]
    assert b[:2] == ["cpu1", "lease-b"]
    assert a[2] != b[2]
    assert {a[2], b[2]} == {str(w.pid) for w in plane.slots.workers.values()}


def test_a_lease_cannot_reach_another_lease_handles(plane: DataPlane) -> None:
    env = client_env(plane, "lease-a", "lease-a-secret")
    holder = subprocess.Popen(
        [BARE_PYTHON, "-c", HOLD_A_HANDLE], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert holder.stdout is not None
        stolen = int(holder.stdout.readline())
        out = run_client(
            plane,
            "lease-b",
            "lease-b-secret",
            "from radium_interposer import proxy\n"
            f"h = proxy.Remote({{'$': 'h', 'id': {stolen}}}, 'numpy.ndarray', None)\n"
            "try:\n    print(len(h))\n"
            "except LookupError as e:\n    print('refused', 'unknown handle' in str(e))\n",
        )
        assert out.strip() == "refused True"
        # The handle is alive for its own lease all along.
        holder.communicate(b"\n", timeout=60)
        assert holder.returncode == 0
    finally:
        holder.kill()
        holder.wait()


HOLD_A_HANDLE = """
import radium_interposer.boot
import sys
import numpy as np
h = np.arange(5)
print(object.__getattribute__(h, "_rd_ref")["id"], flush=True)
sys.stdin.readline()
assert len(h) == 5
"""


@pytest.mark.parametrize(
    ("lease", "credential"),
    [("lease-a", "wrong"), ("lease-a", "lease-b-secret"), ("no-such-lease", "lease-a-secret")],
)
def test_wrong_credentials_get_nothing(plane: DataPlane, lease: str, credential: str) -> None:
    started = {lease_id: w.pid for lease_id, w in plane.slots.workers.items()}
    host, port = plane.address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        with pytest.raises(handshake.AuthenticationError, match="authentication failed"):
            handshake.client(sock, lease, credential)
        assert closed_by_peer(sock)  # nothing sent after this is ever read
    assert plane.refused >= 1
    assert {k: w.pid for k, w in plane.slots.workers.items()} == started


def test_garbage_is_refused_and_the_listener_keeps_serving(plane: DataPlane) -> None:
    host, port = plane.address.rsplit(":", 1)
    for garbage in (b"GET / HTTP/1.1\r\n\r\n", b"RDM1" + b"\xff" * 40, b""):
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(garbage)
            # The acceptor may have reset the connection already (our bytes left unread).
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_WR)
            assert closed_by_peer(sock)
    out = run_client(plane, "lease-a", "lease-a-secret", "import numpy\nprint(numpy.eye(2).sum())")
    assert out.strip() == "2.0"


class SlotsWhoseWorkerHungUp(Slots):
    """A lease whose worker is gone as the connection is handed over (it died after it was up)."""

    def hand_over(self, lease_id: str, connection: socket.socket, timeout: float) -> None:
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")


def test_a_worker_that_cannot_take_the_connection_is_named_to_the_client(tmp_path: Path) -> None:
    slots = SlotsWhoseWorkerHungUp(str(tmp_path), CpuBackend(1, 1024))
    slots.prepare(pb.Lease(id="lease-a", device_ids=["cpu0"], credential="lease-a-secret"))
    plane = DataPlane(f"127.0.0.1:{free_port()}", slots)
    plane.start()
    try:
        host, port = plane.address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            handshake.client(sock, "lease-a", "lease-a-secret")
            frame = wire.read(sock.recv_into)
    finally:
        plane.stop()
        slots.close()
    assert frame is not None and frame.type == wire.ERROR
    assert frame.meta["args"] == [
        "radium: the lease's worker could not start: "
        "the worker of lease lease-a did not take the connection (Broken pipe)"
    ]
    assert plane.refused == 0  # it was authenticated: not a refusal


def dial(plane: DataPlane) -> socket.socket:
    host, port = plane.address.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=30)


def test_idle_connections_past_the_per_source_limit_close_their_oldest(tmp_path: Path) -> None:
    slots = Slots(str(tmp_path), CpuBackend(1, 1024))
    slots.prepare(pb.Lease(id="lease-a", device_ids=["cpu0"], credential="lease-a-secret"))
    plane = DataPlane(f"127.0.0.1:{free_port()}", slots, Table(limit=100, per_source=4))
    plane.start()
    idle = [dial(plane) for _ in range(10)]
    try:
        # The newest four hold the source's entries; every older one was closed for them.
        assert all(closed_by_peer(sock) for sock in idle[:6])
        out = run_client(
            plane, "lease-a", "lease-a-secret", "import numpy\nprint(numpy.ones(3).sum())"
        )
        assert out.strip() == "3.0"  # one source: the client's handshake got an entry too
        assert closed_by_peer(idle[6])  # the oldest left, closed for the client's connection
    finally:
        for sock in idle:
            sock.close()
        plane.stop()
        slots.close()


def test_a_handshake_waits_for_a_late_grant_without_a_thread(tmp_path: Path) -> None:
    slots = Slots(str(tmp_path), CpuBackend(1, 1024))
    plane = DataPlane(f"127.0.0.1:{free_port()}", slots)
    plane.start()
    outcome: list[object] = []
    try:
        with dial(plane) as sock:
            thread = threading.Thread(
                target=lambda: outcome.append(handshake.client(sock, "late", "late-secret"))
            )
            thread.start()
            while not plane.awaiting:  # the proof is in, the lease not granted yet
                time.sleep(0.01)
            assert not [t for t in threading.enumerate() if t.name.startswith("hand-over")]
            slots.grant(pb.Lease(id="late", device_ids=["cpu0"], credential="late-secret"))
            thread.join(timeout=30)
        assert outcome == [wire.VERSION]
    finally:
        plane.stop()
        slots.close()


@pytest.mark.parametrize(
    ("address", "parsed"),
    [(":7420", ("0.0.0.0", 7420)), ("[::1]:7420", ("::1", 7420)), ("10.0.0.2:1", ("10.0.0.2", 1))],
)
def test_a_data_address_is_read_as_the_config_s_addresses_are(
    address: str, parsed: tuple[str, int]
) -> None:
    assert split_address(address) == parsed


@pytest.mark.parametrize("address", ["7420", "host:", "host:99999", "host:x"])
def test_a_bad_data_address_is_one_clear_line(address: str) -> None:
    with pytest.raises(ConfigError, match="is not HOST:PORT"):
        split_address(address)
