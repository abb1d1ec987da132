"""One program run four ways, for programs.py and mlp_step.py: locally (this Python, with torch
and numpy), and remoted from a Python without them (``/usr/bin/python3``) to the worker of a
``WorkerHarness``, with every call waiting (``RADIUM_STREAM=0``), streaming with every call down
the full path (``RADIUM_EXPRESS=0``), or streaming (the default: a call of a shape seen before
goes by its express lane).

Each remoted run gets a fresh ``RADIUM_STATS_FILE``: the interposer appends one line per process
at exit (calls, streamed, express, round trips), summed here into the run's ``totals``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.interposer.harness import BARE_PYTHON, WorkerHarness

#: The remoted modes and the interposer environment each adds. "streaming+replay" is not built
#: yet, so it has no mode (and no column anywhere).
MODES: dict[str, dict[str, str]] = {
    "nostream": {"RADIUM_STREAM": "0"},
    "noexpress": {"RADIUM_EXPRESS": "0"},
    "stream": {},
}
LABELS = {
    "local": "local",
    "nostream": "STREAM=0",
    "noexpress": "no express",
    "stream": "streaming",
}
COUNTS = ("calls", "streamed", "express", "waited", "round_trips")


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    """(wall seconds, stderr) of a process that must exit 0."""
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=900)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{argv[-1]} failed: {done.stderr[-2000:]}")
    return elapsed, done.stderr


def last_json(stderr: str) -> dict[str, Any]:
    """The report a program prints as its stderr's last line."""
    report: dict[str, Any] = json.loads(stderr.strip().splitlines()[-1])
    return report


def stats_file_totals(path: Path) -> dict[str, int]:
    """The sum of ``RADIUM_STATS_FILE``'s lines: every process of the run, every run in it."""
    totals = dict.fromkeys(COUNTS, 0)
    lines = path.read_text().splitlines() if path.exists() else []
    for line in lines:
        entry = json.loads(line)
        for key in COUNTS:
            totals[key] += int(entry.get(key, 0))
    totals["processes"] = len(lines)
    return totals


def run(
    harness: WorkerHarness, mode: str, args: list[str], remote: str, cwd: Path
) -> dict[str, Any]:
    """``python ARGS`` in ``mode`` (``local`` or one of :data:`MODES`): the program's stderr
    report (its last line, JSON), with ``whole`` (the process's wall seconds) and, remoted,
    ``totals`` from its stats file."""
    if mode == "local":
        elapsed, stderr = timed([sys.executable, *args], {"PATH": os.environ["PATH"]}, cwd)
        return {**last_json(stderr), "whole": elapsed}
    fd, name = tempfile.mkstemp(prefix="stats-", suffix=".jsonl", dir=cwd)
    os.close(fd)
    stats = Path(name)
    try:
        env = harness.env(remote, RADIUM_STATS_FILE=str(stats), **MODES[mode])
        elapsed, stderr = timed([BARE_PYTHON, *args], env, cwd)
        return {**last_json(stderr), "whole": elapsed, "totals": stats_file_totals(stats)}
    finally:
        stats.unlink(missing_ok=True)


def ratio_summary(ratios: dict[str, dict[str, list[tuple[float, str]]]]) -> list[str]:
    """Per kind (torch, numpy) and remoted mode: the median and worst warm ratio."""
    lines = []
    for kind, by_mode in ratios.items():
        parts = []
        for mode, values in by_mode.items():
            if not values:
                continue
            worst, name = max(values)
            median = statistics.median(v for v, _ in values)
            parts.append(f"{LABELS[mode]} median {median:.2f} worst {worst:.2f} ({name})")
        if parts:
            count = len(next(iter(by_mode.values())))
            lines.append(f"warm remoted/local, {kind} programs ({count}): " + "; ".join(parts))
    return lines
