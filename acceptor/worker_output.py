"""What a lease's process-mode worker writes (stdout and stderr), and how it ended, for the log.

The worker runs the tenant's code, so its output is the tenant's: it goes into a pipe, never
straight to the acceptor's own stderr (the acceptor log). One thread per worker reads the pipe
without ever blocking on it (``select`` with a timeout; it ends at the pipe's end, or
:data:`REPORT_WAIT` after a stop), keeps the last :data:`TAIL_LINES` lines (each cut at
:data:`LINE_CHARS` characters, control characters escaped) and forwards lines to the log within
a budget per lease, shared by its successive workers (a burst of :data:`BURST` lines, then
:data:`RATE` a second; what it drops is counted and said). When the pipe closes the worker has
ended: its exit status or signal and its last lines (as far as the budget goes) are logged,
unless the acceptor stopped it.
"""

from __future__ import annotations

import collections
import logging
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Callable, Mapping

__all__ = [
    "BURST",
    "LINE_CHARS",
    "POLL",
    "RATE",
    "REPORT_WAIT",
    "TAIL_LINES",
    "Budget",
    "OutputTail",
    "clean",
    "describe",
    "oom_kills",
    "report",
    "report_container",
]

log = logging.getLogger(__name__)
#: Lines of the worker's output kept for the report of its end.
TAIL_LINES = 20
#: A line is cut after this many characters (a line with no newline is cut, not buffered).
LINE_CHARS = 1000
#: Lines a worker may send to the log at once, and then each second: a tenant that floods
#: its stderr costs the acceptor log about RATE lines a second, not what it writes.
BURST = 200
RATE = 2.0
#: How long the reading thread waits in one select: how soon it sees that its time is up.
POLL = 1.0
#: How long the report waits for the process once its output has closed.
REPORT_WAIT = 10.0
_READ = 65536
#: Bytes of a line kept (a line without end too): enough for LINE_CHARS characters of UTF-8.
_KEPT = LINE_CHARS * 4


def clean(text: str) -> str:
    """A line of the tenant's for the log: cut after LINE_CHARS characters, control characters
    escaped (it cannot forge or erase other lines)."""
    more = len(text) - LINE_CHARS
    text = "".join(c if c.isprintable() or c == "\t" else repr(c)[1:-1] for c in text[:LINE_CHARS])
    return text + (f"... ({more} more characters)" if more > 0 else "")


def _text(raw: bytes) -> str:
    return clean(raw.decode("utf-8", "replace").rstrip("\r"))


def describe(returncode: int, sandboxed: bool) -> str:
    """How the worker ended, in words. bubblewrap (``sandboxed``) exits with 128 + N when its
    payload was killed by signal N, as a shell does; Popen says -N for a direct child."""
    number = -returncode if returncode < 0 else returncode - 128 if sandboxed else 0
    try:
        name = signal.Signals(number).name if number > 0 else ""
    except ValueError:
        name = ""
    if not name:
        return f"exited with status {returncode}"
    return f"was killed by {name}" + (f" (status {returncode})" if returncode > 0 else "")


def oom_kills(directories: Iterable[Path]) -> int:
    """How many processes the OOM killer killed in a lease's memory cgroup (cgroup v2
    ``memory.events``, v1 ``memory.oom_control``); 0 where it cannot say."""
    for directory in directories:
        for name in ("memory.events", "memory.oom_control"):
            try:
                text = (directory / name).read_text()
            except OSError:
                continue
            for line in text.splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill" and value.strip().isdigit():
                    return int(value)
    return 0


class Budget:
    """A token bucket: :meth:`take` is True while the worker may still log a line."""

    def __init__(
        self, burst: int = BURST, rate: float = RATE, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.burst, self.rate, self.clock = burst, rate, clock
        self.tokens, self.last = float(burst), clock()
        self.lock = threading.Lock()  # a lease's old worker may report while its new one logs

    def take(self) -> bool:
        with self.lock:
            now = self.clock()
            self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
            self.last = now
            if self.tokens < 1:
                return False
            self.tokens -= 1
            return True


class OutputTail:
    """A pipe for a worker's stdout and stderr, read by a thread of its own.

    Give :attr:`write_fd` to the worker, then :meth:`started` (which closes this process's copy)
    with the process; :meth:`stop` before the acceptor stops it itself.
    """

    def __init__(
        self,
        lease_id: str,
        budget: Budget | None = None,
        oom: Callable[[], int] | None = None,
    ) -> None:
        """``oom()``: how many processes the OOM killer killed in the worker's cgroup."""
        self.lease_id, self.oom = lease_id, oom
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        #: The last lines, as written (each cut at :data:`_KEPT` bytes): made text only when shown.
        self.lines: collections.deque[bytes] = collections.deque(maxlen=TAIL_LINES)
        self.budget = budget or Budget()
        self.dropped = 0
        self.partial = b""
        self.process: subprocess.Popen[bytes] | None = None
        self.sandboxed = False
        #: Set by :meth:`stop`: the acceptor ends the worker; True when it was still running.
        self.stopping = threading.Event()
        self.alive_when_stopped = False
        #: After a stop, the thread reads on until the pipe closes or this (monotonic) time.
        self.drain_until = float("inf")
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"output-{lease_id}")
        self.thread.start()

    def started(self, process: subprocess.Popen[bytes] | None, sandboxed: bool) -> None:
        """The worker holds the write end now (None: it did not start); close ours, so the pipe
        closes when the worker and everything it started are gone."""
        self.process, self.sandboxed = process, sandboxed
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1

    def stop(self) -> None:
        """The acceptor stops the worker: its end is no news (the thread ends within POLL)."""
        if self.process is not None:
            self.alive_when_stopped = self.process.poll() is None
        self.drain_until = time.monotonic() + REPORT_WAIT
        self.stopping.set()
        if self.write_fd >= 0:  # never started
            os.close(self.write_fd)
            self.write_fd = -1

    def tail(self) -> list[str]:
        """The worker's last lines (at most TAIL_LINES)."""
        return [_text(line) for line in self.lines]

    def _run(self) -> None:
        try:
            while time.monotonic() < self.drain_until:
                ready, _, _ = select.select([self.read_fd], [], [], POLL)
                if not ready:
                    continue
                try:
                    chunk = os.read(self.read_fd, _READ)
                except BlockingIOError:
                    continue
                if not chunk:
                    if self.partial:
                        self.feed(b"\n")
                    self._ended()
                    return
                self.feed(chunk)
        finally:
            os.close(self.read_fd)

    def feed(self, chunk: bytes) -> None:
        """Take a chunk of output: its whole lines are logged as far as the budget goes (the
        rest counted) and the last kept; an unfinished line waits, cut at :data:`_KEPT` bytes.
        Only lines that are shown cost Python work per line: a flood of them is C-speed."""
        data = self.partial + chunk
        end = data.rfind(b"\n")
        if end < 0:
            self.partial = data[:_KEPT]
            return
        self.partial = data[end + 1 : end + 1 + _KEPT]
        start = 0
        while start <= end and self.budget.take():
            stop = data.find(b"\n", start)
            self._log(data[start : min(stop, start + _KEPT)])
            start = stop + 1
        if start <= end:
            self.dropped += data.count(b"\n", start, end + 1)
        # The last TAIL_LINES lines not logged; a first part holding the lines before them is
        # pushed out of the ring by them (it is one part more than the ring holds).
        last = data[start:end].rsplit(b"\n", TAIL_LINES) if start <= end else []
        self.lines.extend(line[:_KEPT] for line in last)

    def _log(self, raw: bytes) -> None:
        self.lines.append(raw[:_KEPT])
        if self.dropped:
            log.warning(
                "lease %s: %d lines of its worker's output not logged (over %d, then %g a second)",
                self.lease_id,
                self.dropped,
                BURST,
                RATE,
            )
            self.dropped = 0
        log.info("lease %s worker: %s", self.lease_id, _text(raw))

    def _ended(self) -> None:
        """The worker's output closed: say how it ended, unless the acceptor ended it."""
        process = self.process
        if process is None:
            return
        try:
            status = process.wait(timeout=REPORT_WAIT)
        except subprocess.TimeoutExpired:  # its output closed, it runs on: no end to report
            log.debug("lease %s: worker %d closed its output", self.lease_id, process.pid)
            return
        how = describe(status, self.sandboxed)
        killed = self.oom() if self.oom is not None and "SIGKILL" in how else 0
        if killed:  # a SIGKILL is what the memory cap sends
            how += f": its memory cap (the OOM killer killed {killed} of its processes)"
        if self.stopping.is_set() and self.alive_when_stopped:
            log.debug("lease %s: worker %d stopped (%s)", self.lease_id, process.pid, how)
            return
        report(self.lease_id, f"(pid {process.pid}) {how}", self.tail(), self.budget, self.dropped)


def report(
    lease_id: str, how: str, lines: list[str], budget: Budget | None = None, dropped: int = 0
) -> None:
    """Log a worker's end that the acceptor did not cause, with its last lines of output as
    far as the lease's ``budget`` goes: a tenant whose workers crash in a loop gets one line a
    crash into the log, not its TAIL_LINES each time."""
    shown = len(lines)
    if budget is not None:  # the last lines first: they say most
        shown = next((n for n in range(len(lines)) if not budget.take()), len(lines))
    said = f"; its last {shown} lines of output follow" if shown else ""
    if not lines:
        said = "; it wrote nothing"
    extra = f" ({dropped} of its lines were not logged as they came)" if dropped else ""
    if shown < len(lines):
        extra += f" ({len(lines) - shown} lines of it not logged: over the lease's budget)"
    log.warning("lease %s: the worker %s%s%s", lease_id, how, said, extra)
    for line in lines[len(lines) - shown :]:
        log.warning("lease %s: worker| %s", lease_id, line)


def report_container(
    lease_id: str,
    where: str,
    state: Mapping[str, Any],
    lines: list[str],
    budget: Budget | None = None,
) -> None:
    """Log the end of a container-mode worker from docker's ``State`` (its exit code, whether
    its memory cap killed it) and docker's last lines of its output (within ``budget``)."""
    code = state.get("ExitCode")
    how = describe(code if isinstance(code, int) else 0, sandboxed=True)  # docker: 128 + N too
    if state.get("OOMKilled"):
        how += ": its memory cap (OOM killer)"
    report(lease_id, f"{where} {how}", [clean(line) for line in lines[-TAIL_LINES:]], budget)
