"""The live ``radium top``: redrawn every interval, and a key acted on as soon as it is pressed.

The pool is read in a thread of its own, so ``q`` quits at once even while a call to an
unreachable pool waits out its deadline; the thread wakes the screen through a pipe.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import select
import termios
import threading
import time
import tty
from types import TracebackType
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.live import Live

from radium.commands.top_view import Snapshot, render
from radium.errors import RadiumError

if TYPE_CHECKING:
    from radium.commands.top import Source

__all__ = ["QUIT", "Keys", "Poller", "watch"]

log = logging.getLogger(__name__)

QUIT = b"q"


class Keys:
    """Keys from ``fd`` one at a time, unechoed, without Enter (cbreak mode: Ctrl-C still
    interrupts); the terminal's modes come back however the view ends."""

    def __init__(self, fd: int | None) -> None:
        self.fd = fd
        self._saved: list[Any] | None = None

    def __enter__(self) -> Keys:
        if self.fd is not None and os.isatty(self.fd):
            self._saved = termios.tcgetattr(self.fd)
            tty.setcbreak(self.fd)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._saved is not None and self.fd is not None:
            termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)

    def wait(self, timeout: float, wake: int) -> bool:
        """Wait up to ``timeout`` for a key or for ``wake`` to be readable; True: quit."""
        fds = [wake] if self.fd is None else [wake, self.fd]
        ready, _, _ = select.select(fds, [], [], timeout)
        if wake in ready:
            os.read(wake, 4096)
        if self.fd is None or self.fd not in ready:
            return False
        pressed = os.read(self.fd, 1024)
        if not pressed:  # stdin is closed: no more keys, Ctrl-C still ends the view
            self.fd = None
        return QUIT in pressed.lower()


class Poller:
    """Reads the pool every ``interval`` in a daemon thread; ``latest`` is the newest
    snapshot, or the last good one with the error of the read that failed."""

    def __init__(self, source: Source, first: Snapshot, interval: float) -> None:
        self.latest = first
        self._source = source
        self._interval = interval
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.wake, self._wake_w = os.pipe()
        self._thread = threading.Thread(target=self._loop, name="radium-top-poller", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                snapshot = self._source.read()
            except RadiumError as exc:
                log.debug("reading the pool failed: %s", exc.one_line())
                snapshot = dataclasses.replace(self.latest, error=exc.one_line())
            except Exception as exc:  # a bug must show on the screen, not freeze it
                log.debug("reading the pool failed", exc_info=True)
                snapshot = dataclasses.replace(self.latest, error=f"{type(exc).__name__}: {exc}")
            self.latest = snapshot
            with self._lock:
                # After stop() the pipe is closed and its numbers may belong to another file.
                if not self._stop.is_set():
                    os.write(self._wake_w, b".")

    def stop(self) -> None:
        """Stop reading; a read under way ends with its deadline, unseen, in the daemon."""
        with self._lock:
            self._stop.set()
            os.close(self.wake)
            os.close(self._wake_w)


def _fd(stream: object) -> int | None:
    try:
        return int(stream.fileno())  # type: ignore[attr-defined]
    except (AttributeError, ValueError, OSError):  # no stdin, or closed: no keys
        return None


def watch(source: Source, interval: float, console: Console, stdin: object) -> int:
    """The live view until ``q``; 0. The first read happens before the screen is taken, so
    a pool that cannot be reached at all ends ``radium top`` with its error (RadiumError)."""
    poller = Poller(source, source.read(), interval)
    footer = f"refreshed every {interval:g}s; q quits"
    # The alternate screen, drawn only when told to: each refresh is one whole frame.
    live = Live(
        console=console,
        screen=True,
        auto_refresh=False,
        redirect_stdout=False,
        redirect_stderr=False,
    )
    with Keys(_fd(stdin)) as keys, live:
        poller.start()
        try:
            while True:
                live.update(render(poller.latest, time.time(), footer), refresh=True)
                if keys.wait(interval, poller.wake):
                    return 0
        finally:
            poller.stop()
