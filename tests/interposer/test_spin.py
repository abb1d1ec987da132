"""Reading a data-plane socket with a short spin before blocking (radium_interposer.spin)."""

from __future__ import annotations

import io
import socket
import threading
import time
from typing import Any, List

import pytest

from radium_interposer import spin, wire


def test_budget_comes_from_the_environment_within_bounds() -> None:
    assert spin.budget_us({}, machine=(2, None)) == spin.BUDGET_US
    assert spin.budget_us({"RADIUM_SPIN_US": "0"}, machine=(2, None)) == 0
    assert spin.budget_us({"RADIUM_SPIN_US": "200"}, machine=(8, None)) == 200
    for wrong in ("-5", "1e3", "fast", "10001", ""):
        assert spin.budget_us({"RADIUM_SPIN_US": wrong}, machine=(2, None)) == spin.BUDGET_US


def test_nothing_spins_with_one_cpu_or_a_fraction_of_one() -> None:
    assert spin.budget_us({}, machine=(1, None)) == 0
    assert spin.budget_us({"RADIUM_SPIN_US": "500"}, machine=(1, None)) == 0
    assert spin.budget_us({}, machine=(16, 0.5)) == 0  # a lease of half a CPU
    assert spin.budget_us({}, machine=(16, 1.0)) == spin.BUDGET_US


def test_the_machine_is_read_when_not_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spin.settings, "cgroup_quota", lambda: 0.25)
    assert spin.budget_us({}) == 0
    monkeypatch.setattr(spin.settings, "cgroup_quota", lambda: None)
    monkeypatch.setattr(spin.os, "sched_getaffinity", lambda pid: {0})
    assert spin.budget_us({}) == 0
    monkeypatch.setattr(spin.os, "sched_getaffinity", lambda pid: {0, 1})
    assert spin.budget_us({}) == spin.BUDGET_US


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
    raw = spin.SpinningSocket(sock, budget=10.0)  # type: ignore[arg-type]
    buffer = bytearray(8)
    assert raw.readinto(buffer) == 3 and buffer[:3] == b"abc"
    assert sock.flags == [socket.MSG_DONTWAIT] * 6  # never a blocking recv


def test_a_read_blocks_once_the_budget_is_spent() -> None:
    sock = _Socket(empty=10**9)
    raw = spin.SpinningSocket(sock, budget=0.001)  # type: ignore[arg-type]
    assert raw.readinto(bytearray(8)) == 3
    assert sock.flags[-1] == 0 and set(sock.flags[:-1]) == {socket.MSG_DONTWAIT}


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
        started = time.monotonic()
        frame = wire.read(reader.readinto)
        assert frame is not None and frame.call_id == 2
        assert time.monotonic() - started >= 0.04
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
