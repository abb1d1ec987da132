"""``radium top``: its snapshot, JSON and live view, drawn from a fake pool client."""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import os
import re
import termios
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from rich.console import Console

from radium.commands import inspect, top, top_live, top_view
from radium.errors import UnavailableError
from radium.proto import pool_pb2 as pb
from radium.proto import pool_pb2_grpc as pb_grpc

ADDRESS = "127.0.0.1:7400"
LEASE_ID = "l-0123456789abcdef"
SHORT = "l-01234567"
UNREACHABLE = UnavailableError(
    f"pool at {ADDRESS}: unavailable (failed to connect to all addresses)",
    hint="is the service running and the address right?",
)


def device(name: str, fraction: float, holders: list[str], up: bool = True) -> pb.DeviceStatus:
    return pb.DeviceStatus(
        acceptor="acc-1",
        device=pb.Device(id=name, vendor="cpu", model="x86_64", memory_mib=16384),
        allocated_fraction=fraction,
        allocated_mib=int(16384 * fraction),
        holders=holders,
        up=up,
    )


def pool_status(now: float = 1000.0) -> pb.StatusResponse:
    return pb.StatusResponse(
        version="0.1.0",
        active_leases=2,
        acceptors=[
            pb.AcceptorStatus(
                name="acc-1", data_address="127.0.0.1:7401", up=True, last_heartbeat=now,
                devices=4,
            ),
            pb.AcceptorStatus(name="acc-2", data_address="127.0.0.1:7402", up=False),
        ],
        devices=[
            device("cpu0", 0.5, ["node-a/c1"]),
            device("cpu1", 0.25, ["node-b/c2"]),
            device("cpu2", 1.0, ["node-c/c3"]),
            device("cpu3", 0.0, [], up=False),
        ],
    )  # fmt: skip


def pool_leases(now: float = 1000.0) -> list[pb.Lease]:
    return [
        pb.Lease(
            id=LEASE_ID, acceptor="acc-1", device_ids=["cpu0"], fraction=0.5, memory_mib=8192,
            holder="node-a/c1", queue="research", priority="train", state="active",
            expires_at=now + 30, ttl_seconds=30, cpu_percent=97.4, rss_bytes=200 << 20,
            gpu_memory_bytes=5 << 30, gpu_sm_percent=42.4, created_at=now - 150,
            calls=12345, bytes_in=3 << 30, bytes_out=1536, busy_seconds=4.25, errors=2,
            credential="secret",
        ),
        pb.Lease(
            id="l-fedcba9876543210", acceptor="acc-1", device_ids=["cpu2"], fraction=1.0,
            holder="node-c/c3", priority="batch", state="preempting", expires_at=now + 20,
            preempted_at=now - 5, preempted_for="research",
        ),
    ]  # fmt: skip


class FakePool:
    """The calls ``radium top`` makes of a PoolClient; ``fail``: raise it; ``hang``: wait for
    it to be set before answering."""

    def __init__(self, now: float = 1000.0) -> None:
        self.address = ADDRESS
        self.state = pool_status(now)
        self.held = pool_leases(now)
        self.fail: Exception | None = None
        self.hang: threading.Event | None = None
        self.connects = 0
        self.closes = 0
        self.asked_all: list[tuple[bool, int]] = []

    def connect(self) -> FakePool:
        self.connects += 1
        return self

    def status(self) -> pb.StatusResponse:
        if self.hang is not None:
            self.hang.wait()
        if self.fail is not None:
            raise self.fail
        return self.state

    def leases(self, *, all_: bool = False, ended_most: int = 0) -> list[pb.Lease]:
        self.asked_all.append((all_, ended_most))
        if self.fail is not None:
            raise self.fail
        return self.held

    def close(self) -> None:
        self.closes += 1


def options(**given: object) -> argparse.Namespace:
    values: dict[str, object] = {"json": False, "once": False, "all": False, "interval": 1.0}
    return argparse.Namespace(**{**values, **given})


def plain(snapshot: top_view.Snapshot, now: float = 1001.0) -> str:
    out = io.StringIO()
    top_view.print_plain(snapshot, out, now)
    return out.getvalue()


def line_with(text: str, pattern: str) -> str:
    """The one line of ``text`` that ``pattern`` (a regular expression) is found in."""
    found = [line for line in text.splitlines() if re.search(pattern, line)]
    assert len(found) == 1, (pattern, text)
    return found[0]


def test_snapshot_shows_each_lease_with_holder_queue_and_device() -> None:
    pool = FakePool(now=time.time())
    out = io.StringIO()  # not a terminal: one plain snapshot, without --once
    assert top.run(options(), pool.connect, out) == 0
    text = out.getvalue()
    assert "\x1b" not in text and all(line == line.rstrip() for line in text.splitlines())
    first = text.splitlines()[0]
    assert first.startswith(f"radium top: pool 0.1.0 at {ADDRESS}, ")
    assert first.endswith(": 2 acceptors (1 up), 4 devices, 2 active leases")
    lease = line_with(text, SHORT).split()
    assert lease[5] == "2m"  # age: granted 150 s before this test's clock
    assert lease[:5] + lease[6:] == [
        SHORT, "node-a/c1", "research", "train", "active", "acc-1", "cpu0", "0.50",
        "97%", "200.0", "MiB", "5.0", "GiB", "42%", "12345", "2", "4.2s", "3.0", "GiB", "1.5",
        "KiB",
    ]  # fmt: skip
    assert LEASE_ID not in text and "secret" not in text
    assert line_with(text, "l-fedcba98").split()[1:5] == ["node-c/c3", "default", "batch",
                                                          "preempting"]  # fmt: skip
    assert line_with(text, "acc-2").split()[:2] == ["acc-2", "DOWN"]
    assert "ALLOCATED" in text  # what the pool knows: allocation, not utilisation
    assert pool.closes == 1 and pool.asked_all == [(False, top.ENDED_SHOWN)]


def test_device_bars_show_the_allocated_fraction() -> None:
    text = plain(top_view.Snapshot(ADDRESS, pool_status(), pool_leases(), 1000.0))
    for name, cells, percent in (("cpu0", 10, "50%"), ("cpu1", 5, "25%"), ("cpu2", 20, "100%")):
        row = line_with(text, rf"^acc-1 +{name} ")
        assert re.search(rf"█{{{cells}}}(?!█)", row) and percent in row, row
    idle = line_with(text, "cpu3")
    assert "█" not in idle and "0%" in idle and "DOWN" in idle
    assert "node-a/c1" in line_with(text, r"^acc-1 +cpu0 ")


def test_ages_and_expiry_are_counted_from_now() -> None:
    text = plain(top_view.Snapshot(ADDRESS, pool_status(), pool_leases(), 1000.0), now=1010.0)
    assert "10s ago" in line_with(text, "127.0.0.1:7401")
    assert "never" in line_with(text, "127.0.0.1:7402")
    assert " 2m " in line_with(text, SHORT)  # granted at 850


@pytest.mark.parametrize(
    "seconds, shown", [(0, "0s"), (59.4, "59s"), (60, "1m"), (7199, "1h"), (86400 * 3, "3d")]
)
def test_durations_are_short(seconds: float, shown: str) -> None:
    assert top_view.duration(seconds) == shown


def test_the_error_line_says_why_and_keeps_the_last_state() -> None:
    snapshot = top_view.Snapshot(ADDRESS, pool_status(), pool_leases(), 1000.0)
    lost = dataclasses.replace(snapshot, error=UNREACHABLE.one_line())
    text = plain(lost, now=1004.0)
    assert text.splitlines()[1] == (
        f"error: pool at {ADDRESS}: unavailable (failed to connect to all addresses); "
        "is the service running and the address right?; last read 4s ago"
    )
    assert SHORT in text  # what the pool said last is still on the screen
    never = plain(top_view.Snapshot(ADDRESS, error=UNREACHABLE.one_line()))
    assert never.splitlines() == [
        f"radium top: pool at {ADDRESS}",
        f"error: {UNREACHABLE.one_line()}",
    ]


def test_an_unreachable_pool_ends_a_snapshot_with_its_error() -> None:
    pool = FakePool()
    pool.fail = UNREACHABLE
    for given in (options(once=True), options(json=True, once=True)):
        with pytest.raises(UnavailableError) as raised:  # the CLI prints its one line, exit 1
            top.run(given, pool.connect, io.StringIO())
        assert raised.value is UNREACHABLE
    assert pool.closes == 2


def test_once_json_is_what_radium_leases_json_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both commands, unchanged, against one pool: a gRPC server answering with fixed data."""

    class Pool(pb_grpc.PoolServicer):  # type: ignore[misc]
        def ListLeases(self, request: pb.ListLeasesRequest, context: object) -> object:
            return pb.ListLeasesResponse(leases=pool_leases()[: 1 if not request.all else 2])

    server = grpc.server(futures.ThreadPoolExecutor(2))
    pb_grpc.add_PoolServicer_to_server(Pool(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        config = tmp_path / "config.toml"
        config.write_text(f'[client]\npool = "127.0.0.1:{port}"\ntoken = "t"\n')
        monkeypatch.setenv("RADIUM_CONFIG", str(config))
        for every in (False, True):
            assert inspect._leases(argparse.Namespace(json=True, all=every)) == 0
            expected = capsys.readouterr().out
            assert top._top(options(json=True, once=True, all=every)) == 0
            assert capsys.readouterr().out == expected
            assert len(json.loads(expected)) == (2 if every else 1)
    finally:
        server.stop(None)
    # The fake client gives the same document for the same leases.
    out = io.StringIO()
    assert top.run(options(json=True, once=True), FakePool().connect, out) == 0
    assert out.getvalue() == json.dumps(inspect.as_dicts(pool_leases()), indent=2) + "\n"


class Terminal:
    """A pseudo-terminal for stdin and a terminal console writing into a buffer."""

    def __init__(self) -> None:
        self.master, self.slave = os.openpty()
        self.modes = termios.tcgetattr(self.slave)
        self.stdin = io.FileIO(self.slave, closefd=False)
        self.screen = io.StringIO()
        self.console = Console(
            file=self.screen, force_terminal=True, width=200, height=50, color_system=None
        )

    def frame(self) -> str:
        """The last frame rich drew (each starts by moving the cursor home)."""
        return self.screen.getvalue().split("\x1b[H")[-1]

    def wait_for(self, predicate: Callable[[], bool], what: str, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            assert time.monotonic() < deadline, f"no {what} on the screen:\n{self.frame()}"
            time.sleep(0.02)

    def close(self) -> None:
        os.close(self.master)
        os.close(self.slave)


@pytest.fixture
def terminal() -> Iterator[Terminal]:
    t = Terminal()
    yield t
    t.close()


def start_watching(
    pool: FakePool, terminal: Terminal, interval: float
) -> tuple[threading.Thread, list[int]]:
    result: list[int] = []
    source = top.Source(pool.connect, False)

    def view() -> None:
        try:
            result.append(top_live.watch(source, interval, terminal.console, terminal.stdin))
        finally:
            source.close()

    thread = threading.Thread(target=view, daemon=True)
    thread.start()
    return thread, result


def test_live_view_quits_on_q_and_gives_the_terminal_back(terminal: Terminal) -> None:
    pool = FakePool()
    thread, result = start_watching(pool, terminal, interval=0.1)
    terminal.wait_for(lambda: SHORT in terminal.frame(), "lease")
    assert not termios.tcgetattr(terminal.slave)[3] & termios.ICANON  # keys without Enter
    assert "refreshed every 0.1s; q quits" in terminal.frame()
    os.write(terminal.master, b"x")  # another key: nothing happens
    time.sleep(0.3)
    assert thread.is_alive()
    os.write(terminal.master, b"q")
    thread.join(5)
    assert result == [0]
    assert termios.tcgetattr(terminal.slave) == terminal.modes
    assert terminal.screen.getvalue().endswith("\x1b[?1049l")  # the main screen is back


def test_live_view_shows_a_pool_that_went_away_and_comes_back(terminal: Terminal) -> None:
    pool = FakePool()
    thread, result = start_watching(pool, terminal, interval=0.05)
    terminal.wait_for(lambda: SHORT in terminal.frame(), "lease")
    pool.fail = UNREACHABLE
    terminal.wait_for(lambda: "error: pool at" in terminal.frame(), "error")
    assert SHORT in terminal.frame()  # the last state read stays
    before = pool.connects
    terminal.wait_for(lambda: pool.connects > before + 1, "retry")  # a new client per retry
    pool.fail = None
    terminal.wait_for(lambda: "error" not in terminal.frame(), "recovery")
    assert SHORT in terminal.frame()
    os.write(terminal.master, b"q")
    thread.join(5)
    assert result == [0]


def test_q_quits_at_once_while_a_read_hangs(terminal: Terminal) -> None:
    pool = FakePool()
    thread, result = start_watching(pool, terminal, interval=0.05)
    terminal.wait_for(lambda: SHORT in terminal.frame(), "lease")
    pool.hang = threading.Event()  # the next read waits, as on a pool that stopped answering
    time.sleep(0.2)
    pressed = time.monotonic()
    os.write(terminal.master, b"q")
    thread.join(5)
    try:
        assert result == [0] and time.monotonic() - pressed < 1
    finally:
        pool.hang.set()


def test_the_terminal_is_given_back_when_the_view_is_interrupted(terminal: Terminal) -> None:
    class Interrupted(io.StringIO):
        def write(self, text: str) -> int:
            if SHORT in text and not hasattr(self, "raised"):
                self.raised = True
                raise KeyboardInterrupt
            return super().write(text)

    terminal.console.file = Interrupted()
    with pytest.raises(KeyboardInterrupt):
        top_live.watch(top.Source(FakePool().connect, False), 1.0, terminal.console, terminal.stdin)
    assert termios.tcgetattr(terminal.slave) == terminal.modes


def test_a_pool_unreachable_from_the_start_ends_the_live_view_before_it_begins(
    terminal: Terminal,
) -> None:
    pool = FakePool()
    pool.fail = UNREACHABLE
    with pytest.raises(UnavailableError):  # the CLI prints its one line and exits 1
        top_live.watch(top.Source(pool.connect, False), 1.0, terminal.console, terminal.stdin)
    assert terminal.screen.getvalue() == ""  # the screen was never taken
    assert termios.tcgetattr(terminal.slave) == terminal.modes


def test_ended_leases_are_shown_without_expiry() -> None:
    ended = pb.Lease(id="l-00000000ffffffff", state="released", holder="n/c", expires_at=1.0)
    text = plain(top_view.Snapshot(ADDRESS, pool_status(), [*pool_leases(), ended], 1000.0))
    assert line_with(text, "l-00000000").split()[1:6] == ["n/c", "default", "train", "released",
                                                          "-"]  # fmt: skip


def test_interval_must_be_a_sane_number_of_seconds() -> None:
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers()
    top.register(commands)
    assert parser.parse_args(["top"]).interval == 1.0
    assert parser.parse_args(["top", "--interval", "0.5"]).interval == 0.5
    for bad in ("0", "nan", "x", "-1"):
        with pytest.raises(SystemExit):
            parser.parse_args(["top", "--interval", bad])
