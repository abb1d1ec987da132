"""A worker's output and end, for the acceptor log: real child processes write into the pipe;
the log budget runs on a fake clock. integration/test_worker_exit.py runs it in a real acceptor."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, cast

import pytest

from radium.acceptor import worker_output
from radium.acceptor.container_worker import ContainerWorker
from radium.acceptor.devices import CpuBackend
from radium.acceptor.engines import Docker
from radium.acceptor.sandbox import Tenant
from radium.acceptor.slots import Slots
from radium.acceptor.worker_output import (
    BURST,
    LINE_CHARS,
    TAIL_LINES,
    Budget,
    OutputTail,
    clean,
    describe,
    oom_kills,
    report_container,
)
from radium.acceptor.workers import ProcessWorker
from radium.proto import pool_pb2 as pb
from radium_interposer.control import READY


def run(tail: OutputTail, code: str) -> subprocess.Popen[bytes]:
    """``code`` in a child whose stdout and stderr are the tail's pipe; its end is awaited."""
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdout=tail.write_fd, stderr=tail.write_fd
    )
    tail.started(child, sandboxed=False)
    tail.thread.join(60)
    assert not tail.thread.is_alive(), "the pipe never closed"
    return child


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == worker_output.__name__]


@pytest.mark.parametrize(
    ("status", "sandboxed", "said"),
    [
        (-9, False, "was killed by SIGKILL"),
        (137, True, "was killed by SIGKILL (status 137)"),  # bubblewrap, docker: 128 + N
        (139, True, "was killed by SIGSEGV (status 139)"),
        (3, True, "exited with status 3"),
        (137, False, "exited with status 137"),  # a direct child's own exit(137)
        (200, True, "exited with status 200"),  # 128 + 72 names no signal
        (0, False, "exited with status 0"),
    ],
)
def test_how_a_worker_ended_in_words(status: int, sandboxed: bool, said: str) -> None:
    assert describe(status, sandboxed) == said


def test_a_worker_killed_by_a_signal_is_logged_with_its_last_lines(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    tail = OutputTail("l-kill")
    code = "import os, sys\nprint('to stdout', flush=True)\nsys.stderr.write('dying now\\n')\n"
    child = run(tail, code + "sys.stderr.flush()\nos.kill(os.getpid(), 9)\n")
    said = messages(caplog)
    assert said[:2] == ["lease l-kill worker: to stdout", "lease l-kill worker: dying now"]
    assert said[2] == (
        f"lease l-kill: the worker (pid {child.pid}) was killed by SIGKILL; "
        "its last 2 lines of output follow"
    )
    assert said[3:] == ["lease l-kill: worker| to stdout", "lease l-kill: worker| dying now"]
    assert [r.levelname for r in caplog.records][2:] == ["WARNING"] * 3


def test_a_worker_that_exits_is_logged_with_its_status(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    tail = OutputTail("l-exit")
    child = run(tail, "import sys\nsys.exit(3)\n")
    assert messages(caplog) == [
        f"lease l-exit: the worker (pid {child.pid}) exited with status 3; it wrote nothing"
    ]


def test_a_worker_the_acceptor_stops_is_no_news(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    tail = OutputTail("l-stop")
    child = subprocess.Popen(
        [sys.executable, "-c", "import time\nprint('up', flush=True)\ntime.sleep(600)\n"],
        stdout=tail.write_fd,
    )
    tail.started(child, sandboxed=False)
    try:
        tail.stop()
    finally:
        child.kill()
    tail.thread.join(60)
    assert not tail.thread.is_alive()
    said = messages(caplog)
    assert not [m for m in said if "the worker" in m], said


def test_a_flood_of_output_costs_the_log_its_budget_and_the_tail_stays_bounded(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    now = [0.0]
    tail = OutputTail("l-flood", Budget(clock=lambda: now[0]))  # no time passes: no refill
    code = "import sys\nfor n in range(20000):\n    print(f'line {n} ' + 'x' * 300)\n"
    run(tail, code + "sys.stdout.write('y' * 1000000)\n")  # and a last line with no end
    said = messages(caplog)
    live = [m for m in said if m.startswith("lease l-flood worker: ")]
    assert len(live) == BURST
    assert said[len(live)].startswith("lease l-flood: the worker (pid ")
    assert "(19801 of its lines were not logged as they came)" in said[len(live)]
    lines = tail.tail()
    assert len(lines) == TAIL_LINES and lines[-2].startswith("line 19999 ")
    assert lines[-1] == "y" * LINE_CHARS + f"... ({4 * LINE_CHARS - LINE_CHARS} more characters)"


def test_the_budget_refills_with_time() -> None:
    now = [0.0]
    budget = Budget(burst=3, rate=2.0, clock=lambda: now[0])
    assert [budget.take() for _ in range(4)] == [True, True, True, False]
    now[0] = 1.0  # two more a second
    assert [budget.take() for _ in range(3)] == [True, True, False]
    now[0] = 100.0  # never more than the burst
    assert sum(budget.take() for _ in range(10)) == 3


def test_a_tenant_line_cannot_forge_or_erase_log_lines() -> None:
    assert clean("ok\r2026 ERROR forged\x1b[2K") == "ok\\r2026 ERROR forged\\x1b[2K"
    assert clean("tab\there é") == "tab\there é"


def test_the_end_of_a_container_worker_names_its_memory_cap() -> None:
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger(worker_output.__name__)
    logger.addHandler(handler)
    try:
        report_container("l-c", "in container abc", {"ExitCode": 137, "OOMKilled": True}, ["a"])
    finally:
        logger.removeHandler(handler)
    assert records == [
        "lease l-c: the worker in container abc was killed by SIGKILL (status 137): its memory "
        "cap (OOM killer); its last 1 lines of output follow",
        "lease l-c: worker| a",
    ]


class FakeDocker:
    """Runs the "container" as a thread that connects back, says it is ready and dies."""

    def __init__(self) -> None:
        self.state: dict[str, Any] = {"Running": True}
        self.removed: list[str] = []

    def run_container(self, name: str, image: str, command: list[str], **options: Any) -> str:
        control = Path(options["binds"][0].split(":")[0]) / "control.sock"

        def worker() -> None:
            connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            connection.connect(str(control))
            connection.sendall(READY)
            self.connection = connection  # held open: the worker lives

        threading.Thread(target=worker).start()
        return "c0ffee" * 4

    def container_state(self, container: str) -> dict[str, Any]:
        return self.state

    def container_logs(self, container: str, lines: int = 20) -> str:
        return "Traceback (most recent call last):\nMemoryError\n"

    def remove_container(self, container: str) -> None:
        self.removed.append(container)


def test_a_container_worker_that_died_is_logged_when_it_is_stopped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    engine = FakeDocker()
    tenant = Tenant("l-box", os.getuid(), tmp_path / "home")
    worker = ContainerWorker(tenant, tmp_path, cast(Docker, engine), "img:1", None)
    assert worker.ready.wait(60) and worker.control is not None
    engine.state = {"Running": False, "ExitCode": 137, "OOMKilled": False}
    worker.stop()
    assert engine.removed == ["c0ffee" * 4]
    assert messages(caplog) == [
        "lease l-box: the worker in container c0ffeec0ffee of img:1 was killed by SIGKILL "
        "(status 137); its last 2 lines of output follow",
        "lease l-box: worker| Traceback (most recent call last):",
        "lease l-box: worker| MemoryError",
    ]


def test_a_container_worker_the_acceptor_stops_is_no_news(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    engine = FakeDocker()
    worker = ContainerWorker(
        Tenant("l-ok", os.getuid(), tmp_path), tmp_path, cast(Docker, engine), "i", None
    )
    assert worker.ready.wait(60)
    worker.stop()  # running until now
    assert messages(caplog) == []


def test_the_oom_killer_s_kills_are_read_from_either_cgroup_version(tmp_path: Path) -> None:
    v2, v1, none = tmp_path / "v2", tmp_path / "v1", tmp_path / "none"
    for directory in (v2, v1, none):
        directory.mkdir()
    (v2 / "memory.events").write_text("low 0\nhigh 0\nmax 7\noom 2\noom_kill 2\n")
    (v1 / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 1\n")
    assert [oom_kills([d]) for d in (v2, v1, none)] == [2, 1, 0]
    assert oom_kills([none, v1]) == 1  # v1: one directory per controller, memory's has it


def test_a_worker_its_memory_cap_killed_is_said_so(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    tail = OutputTail("l-oom", oom=lambda: 1)
    child = run(tail, "import os\nos.kill(os.getpid(), 9)\n")
    assert messages(caplog) == [
        f"lease l-oom: the worker (pid {child.pid}) was killed by SIGKILL: its memory cap "
        "(the OOM killer killed 1 of its processes); it wrote nothing"
    ]
    exited = OutputTail("l-3", oom=lambda: 1)  # an exit status is not the cap's doing
    child = run(exited, "import sys\nsys.exit(3)\n")
    assert messages(caplog)[-1].endswith(
        f"(pid {child.pid}) exited with status 3; it wrote nothing"
    )


def test_a_crash_loop_shares_its_lease_s_budget(caplog: pytest.LogCaptureFixture) -> None:
    """Each crash writes TAIL_LINES lines and dies; the lease's workers share one budget, so
    after it only each crash's one line reaches the log."""
    caplog.set_level(logging.INFO)
    budget = Budget(burst=50, clock=lambda: 0.0)  # no time passes: no refill
    crash = f"import os\nfor n in range({TAIL_LINES}):\n    print('boom', n)\nos._exit(1)\n"
    for _ in range(5):
        run(OutputTail("l-loop", budget), crash)
    said = messages(caplog)
    ends = [m for m in said if "the worker (pid " in m]
    assert len(ends) == 5 and len(said) == 50 + 5  # the budget's lines, and one line a crash
    assert ends[-1].endswith(
        "exited with status 1 (20 of its lines were not logged as they came) "
        "(20 lines of it not logged: over the lease's budget)"
    )


def test_the_workers_of_a_lease_share_its_budget_until_it_ends(tmp_path: Path) -> None:
    slots = Slots(str(tmp_path), CpuBackend(1, 1024))  # unconfined: real workers, no sandbox
    slots.prepare(pb.Lease(id="l-1", device_ids=["cpu0"], credential="secret"))
    ours, theirs = socket.socketpair()
    try:
        slots.hand_over("l-1", theirs, 5.0)
        first = slots.workers["l-1"]
        assert isinstance(first, ProcessWorker)
        first.process.kill()
        first.process.wait(60)
        slots.hand_over("l-1", theirs, 5.0)  # a crashed worker is replaced on the next one
        second = slots.workers["l-1"]
        assert isinstance(second, ProcessWorker) and second is not first
        assert second.output.budget is first.output.budget is slots.budgets["l-1"]
    finally:
        slots.teardown("l-1")
        ours.close()
        theirs.close()
    assert "l-1" not in slots.budgets


def test_the_tail_keeps_the_order_of_lines_logged_and_not(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    tail = OutputTail("l-mix", Budget(burst=3, clock=lambda: 0.0))
    try:
        tail.feed(b"".join(b"%d\n" % n for n in range(10)) + b"unfinished")
        tail.feed(b" line\n" + b"".join(b"%d\n" % n for n in range(10, 40)))
        assert messages(caplog) == [f"lease l-mix worker: {n}" for n in range(3)]
        assert tail.tail() == [str(n) for n in range(20, 40)]
        assert tail.dropped == 38
        tail.feed(b"z" * 100000)  # a line without end is kept cut
        assert len(tail.partial) == 4 * LINE_CHARS
    finally:
        tail.started(None, sandboxed=False)
