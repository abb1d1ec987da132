"""Reading a data-plane socket with a short spin before blocking (radium_interposer.spin)."""

from __future__ import annotations

import io
import socket
import threading
from typing import Any, List

import pytest

from radium_interposer import spin, wire


def test_the_cap_comes_from_the_environment_within_bounds() -> None:
    assert spin.cap_us({}, machine=(2, None)) == spin.CAP_US
    assert spin.cap_us({"RADIUM_SPIN_US": "0"}, machine=(2, None)) == 0
    assert spin.cap_us({"RADIUM_SPIN_US": "200"}, machine=(8, None)) == 200
    for wrong in ("-5", "1e3", "fast", "10001", ""):
        assert spin.cap_us({"RADIUM_SPIN_US": wrong}, machine=(2, None)) == spin.CAP_US


def test_nothing_spins_with_one_cpu_or_a_fraction_of_one() -> None:
    assert spin.cap_us({}, machine=(1, None)) == 0
    assert spin.cap_us({"RADIUM_SPIN_US": "500"}, machine=(1, None)) == 0
    assert spin.cap_us({}, machine=(16, 0.5)) == 0  # a lease of half a CPU
    assert spin.cap_us({}, machine=(16, 1.0)) == spin.CAP_US


def test_the_machine_is_read_when_not_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spin.settings, "cgroup_quota", lambda: 0.25)
    assert spin.cap_us({}) == 0
    monkeypatch.setattr(spin.settings, "cgroup_quota", lambda: None)
    monkeypatch.setattr(spin.os, "sched_getaffinity", lambda pid: {0})
    assert spin.cap_us({}) == 0
    monkeypatch.setattr(spin.os, "sched_getaffinity", lambda pid: {0, 1})
    assert spin.cap_us({}) == spin.CAP_US


class _Socket:
    """recv_into that has nothing for the first ``empty`` non-blocking reads."""

    def __init__(self, empty: int) -> None:
        self.empty = empty
        self.flags: List[int] = []

    def recv_into(self, buffer: Any, size: int = 0, flags: int = 0) -> int:
        self.flags.append(flags)
        if flags & socket.MSG_DONTWAIT and self.empty:
            self.empty -= 1
            raise BlockingIOError
        buffer[:3] = b"abc"
        return 3


def test_a_read_polls_until_the_bytes_arrive_without_blocking() -> None:
    sock = _Socket(empty=5)
    raw = spin.SpinningSocket(sock, cap=10.0, floor=10.0)  # type: ignore[arg-type]
    buffer = bytearray(8)
    assert raw.readinto(buffer) == 3 and buffer[:3] == b"abc"
    assert sock.flags == [socket.MSG_DONTWAIT] * 6  # never a blocking recv


def test_a_read_blocks_once_its_budget_is_spent() -> None:
    sock = _Socket(empty=10**9)
    raw = spin.SpinningSocket(sock, cap=0.001)  # type: ignore[arg-type]
    assert raw.readinto(bytearray(8)) == 3
    assert sock.flags[-1] == 0 and set(sock.flags[:-1]) == {socket.MSG_DONTWAIT}


class _Clock:
    """A clock each read advances by a microsecond."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1e-6
        return self.now


class _Timed:
    """A socket whose bytes arrive ``wait`` seconds after each read starts, on ``clock``."""

    def __init__(self, clock: _Clock, wait: float) -> None:
        self.clock, self.wait, self.arrival = clock, wait, 0.0
        self.blocked = 0

    def expect(self) -> None:
        self.arrival = self.clock.now + self.wait

    def recv_into(self, buffer: Any, size: int = 0, flags: int = 0) -> int:
        if flags & socket.MSG_DONTWAIT and self.clock.now < self.arrival:
            raise BlockingIOError
        if not flags:
            self.blocked += 1
            self.clock.now = max(self.clock.now, self.arrival)  # slept until they came
        buffer[:1] = b"x"
        return 1


def test_the_budget_follows_how_long_answers_take_within_floor_and_cap() -> None:
    floor, cap = 50e-6, 500e-6
    for wait, expected, blocks in (
        (20e-6, floor, False),  # loopback: the floor catches them
        (150e-6, 300e-6, False),  # a datacenter link: twice the typical wait
        (240e-6, 480e-6, False),
        (400e-6, floor, True),  # longer than half the cap: only the floor, then sleep
        (0.5, floor, True),  # a long computation
    ):
        clock = _Clock()
        sock = _Timed(clock, wait)
        raw = spin.SpinningSocket(sock, cap, floor, clock)  # type: ignore[arg-type]
        for _ in range(80):  # the moving average settles
            sock.expect()
            raw.readinto(bytearray(8))
        assert raw.budget() == pytest.approx(expected, rel=0.1), wait
        sock.blocked = 0
        for _ in range(10):
            sock.expect()
            raw.readinto(bytearray(8))
        assert bool(sock.blocked) is blocks, wait


def test_a_read_that_loses_the_cpu_stops_polling_and_sleeps() -> None:
    clock = _Clock()
    sock = _Timed(clock, 300e-6)
    busy = sock.recv_into

    def preempted(buffer: Any, size: int = 0, flags: int = 0) -> int:
        clock.now += 100e-6  # another task ran before this poll came back
        return busy(buffer, size, flags)

    sock.recv_into = preempted  # type: ignore[method-assign]
    raw = spin.SpinningSocket(sock, 1e-3, 1e-3, clock)  # type: ignore[arg-type]
    sock.expect()
    raw.readinto(bytearray(8))
    assert sock.blocked == 1 and clock.now < 310e-6  # slept at the first lost poll


def test_frames_cross_a_real_socket_pair_late_early_and_at_the_end() -> None:
    a, b = socket.socketpair()
    with a, b:
        reader = spin.reader(b, 50)
        assert isinstance(reader, io.BufferedReader)
        wire.send_chunks(a, wire.encode(wire.CALL, 1, {"op": "ping"}, [b"x" * 100_000]))
        frame = wire.read(reader.readinto)
        assert frame is not None and frame.meta == {"op": "ping"}
        assert bytes(frame.buffers[0]) == b"x" * 100_000

        # Well past the budget: the reader sleeps in recv and still gets the frame.
        late = threading.Timer(0.05, wire.send_chunks, (a, wire.encode(wire.CALL, 2, {}, [])))
        late.start()
        frame = wire.read(reader.readinto)
        assert frame is not None and frame.call_id == 2
        late.join()
        a.shutdown(socket.SHUT_WR)
        assert wire.read(reader.readinto) is None  # a clean end


@pytest.mark.parametrize("budget", [0, 50])
def test_a_socket_with_a_timeout_or_no_budget_gets_a_plain_reader(budget: int) -> None:
    a, b = socket.socketpair()
    with a, b:
        if budget:
            b.settimeout(5)  # its reads poll with the timeout before MSG_DONTWAIT is seen
        reader = spin.reader(b, budget)
        assert not isinstance(getattr(reader, "raw", None), spin.SpinningSocket)
        a.sendall(b"hi")
        assert reader.read(2) == b"hi"
