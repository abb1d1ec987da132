"""The worker's counters (calls, bytes in and out, busy seconds, errors), shared by its
connections' threads: what ``stats`` answers a client and the control socket's counters answer
the acceptor (control.COUNTER_NAMES)."""

from __future__ import annotations

import threading
from typing import Any, Dict

from radium_interposer.control import COUNTER_NAMES, Counters

__all__ = ["Stats"]


class Stats:
    """Counters added to under one lock (a method per kind of event: the worker's per-call
    path pays for the fields it changes only)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Dict[str, Any] = dict.fromkeys(COUNTER_NAMES, 0)
        self._counts["busy_seconds"] = 0.0

    def request(self, bytes_in: int, bytes_out: int, seconds: float, failed: bool) -> None:
        """One request (a JSON frame) served."""
        with self._lock:
            counts = self._counts
            counts["calls"] += 1
            counts["bytes_in"] += bytes_in
            counts["bytes_out"] += bytes_out
            counts["busy_seconds"] += seconds
            counts["errors"] += failed

    def batch(self, calls: int, seconds: float) -> None:
        """A binary batch's records run."""
        with self._lock:
            self._counts["calls"] += calls
            self._counts["busy_seconds"] += seconds

    def answer(self, bytes_out: int, failed: bool) -> None:
        """A waiting record's answer sent (its call is counted with its batch)."""
        with self._lock:
            self._counts["bytes_out"] += bytes_out
            self._counts["errors"] += failed

    def snapshot(self) -> Counters:
        with self._lock:
            return dict(self._counts)
