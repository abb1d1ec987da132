"""The listener's limits: handshake table, whole-exchange deadline, per-lease hand-over queues."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from radium.acceptor import handoff
from radium.acceptor.handoff import Handoffs
from radium.acceptor.handshakes import Pending, Table, source_of
from radium_interposer import handshake, wire


def pending(source: str, deadline: float = 100.0) -> Pending:
    return Pending(socket.socket(), (source, 1), source, deadline)


@pytest.fixture
def made() -> Iterator[list[Pending]]:
    entries: list[Pending] = []
    yield entries
    for entry in entries:
        entry.sock.close()


def test_a_source_at_its_limit_loses_its_oldest_entry_not_another_source(
    made: list[Pending],
) -> None:
    table = Table(limit=100, per_source=3)
    made += [pending("10.0.0.2", n) for n in range(4)] + [pending("10.0.0.3", 9)]
    assert table.add(made[4]) is None
    assert [table.add(p) for p in made[:3]] == [None, None, None]
    assert table.add(made[3]) is made[0]  # the attacker's oldest, never the other source's
    assert table.count("10.0.0.2") == 3 and table.count("10.0.0.3") == 1


def test_a_full_table_loses_its_oldest_entry(made: list[Pending]) -> None:
    table = Table(limit=2, per_source=10)
    made += [pending(f"10.0.0.{n}", n) for n in range(3)]
    assert table.add(made[0]) is None and table.add(made[1]) is None
    assert table.add(made[2]) is made[0]
    assert len(table) == 2


def test_entries_past_their_deadline_expire_in_order(made: list[Pending]) -> None:
    table = Table(limit=10, per_source=10)
    made += [pending("10.0.0.2", d) for d in (1.0, 2.0, 3.0)]
    for entry in made:
        table.add(entry)
    assert table.expired(2.5) == made[:2]
    assert table.next_deadline() == 3.0 and table.count("10.0.0.2") == 1


def test_an_ipv6_host_counts_as_its_64() -> None:
    assert source_of(("2001:db8:1:2::5", 1, 0, 0)) == source_of(("2001:db8:1:2:ffff::9", 1))
    assert source_of(("2001:db8:1:3::5", 1)) != source_of(("2001:db8:1:2::5", 1))
    assert source_of(("::ffff:10.0.0.2", 1)) == "10.0.0.2"


def test_a_trickling_peer_meets_the_deadline_of_the_whole_exchange() -> None:
    """Each byte arrives well within any per-read timeout; the exchange's deadline ends it."""
    ours, theirs = socket.socketpair()
    stop = threading.Event()

    def trickle() -> None:
        for byte in b"RDM1" + bytes(20):
            if stop.wait(0.05):
                return
            try:
                theirs.send(bytes([byte]))
            except OSError:
                return

    thread = threading.Thread(target=trickle)
    thread.start()
    try:
        with pytest.raises(socket.timeout):
            handshake.server(ours, {}.get, deadline=time.monotonic() + 0.2)
    finally:
        stop.set()
        thread.join()
        ours.close()
        theirs.close()


def test_send_fd_with_a_timeout_fails_when_the_peer_does_not_read() -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with ours, theirs, socket.socket() as passed, pytest.raises(socket.timeout):
        for _ in range(100_000):  # the socket's buffer fills long before
            wire.send_fd(ours, b"c", passed.fileno(), 0.0)


class StoppedWorker:
    """A worker that never reads its control socket."""

    def __init__(self) -> None:
        self.control, self.peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.calls: list[float] = []

    def hand_over(self, lease_id: str, connection: socket.socket, timeout: float) -> None:
        self.calls.append(timeout)
        wire.send_fd(self.control, b"c", connection.fileno(), timeout)


def test_a_worker_that_does_not_read_is_refused_at_once_after_one_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(handoff, "SEND_TIMEOUT", 0.2)
    worker = StoppedWorker()
    handoffs = Handoffs(worker)
    clients = []
    for _ in range(400):  # more than the socket's buffer holds
        client, server = socket.socketpair()
        clients.append(client)
        handoffs.put("lease-a", server, "peer")
    threads = [t for t in threading.enumerate() if t.name == "hand-over-lease-a"]
    assert len(threads) <= 1  # one thread per lease, however many connections wait
    for thread in threads:
        thread.join()
    assert "lease-a" in handoffs.stuck
    first_stuck = worker.calls.index(0.0)  # after one send met its deadline, none waits
    assert set(worker.calls[first_stuck:]) == {0.0}
    reasons = set()
    for client in clients:
        client.setblocking(False)
        try:
            frame = wire.read(client.recv_into)
        except BlockingIOError:  # handed over: it sits in the worker's socket, unread
            continue
        assert frame is not None and frame.meta["type"] == "WorkerGone"
        reasons.add(frame.meta["args"][0].split(": ")[-1].split(" (")[0])
    assert "the worker of lease lease-a is not taking connections" in reasons
    for sock in [*clients, worker.control, worker.peer]:
        sock.close()
