"""Running ``workload.py``: locally with torch, or remoted through ``radium exec --remote torch``
from the client Python (no torch), each within what is left of the run's deadline."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Deadline", "Runner", "WorkloadFailed"]

WORKLOAD = Path(__file__).with_name("workload.py")
MARK = "GPUCHECK "
#: Seconds ``radium exec`` waits for capacity.
WAIT = 60


class WorkloadFailed(RuntimeError):
    """A run of the workload exited non-zero, gave no result, or ran past the deadline."""


class Deadline:
    """The whole run's time: every wait is bounded by what is left of it."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return max(0.0, self.end - time.monotonic())


@dataclass
class Runner:
    """How to run the workload: ``torch_python`` locally, ``client`` remoted (``python`` runs
    ``radium exec`` with ``env``), on ``device`` ("cuda" or "cpu"), in folder ``cwd``."""

    torch_python: str
    client: str
    python: str
    env: dict[str, str]
    device: str
    cwd: Path
    deadline: Deadline
    #: Every run started, for the cleanup (:meth:`stop_all`).
    started: list[subprocess.Popen[str]] = field(default_factory=list)

    def _argv(self, what: str, args: list[str]) -> list[str]:
        return [str(WORKLOAD), what, "--device", self.device, *args]

    def local(self, what: str, args: list[str]) -> dict[str, Any]:
        """On this machine's torch, no radium (the machine's environment, less radium's)."""
        env = {k: v for k, v in self.env.items() if k != "PYTHONPATH" and "RADIUM" not in k}
        process = self._start([self.torch_python, *self._argv(what, args)], env)
        return self.result(process, f"local {what}")

    def remote_start(self, what: str, args: list[str], amount: list[str]) -> subprocess.Popen[str]:
        """``radium exec AMOUNT --remote torch -- CLIENT workload.py ...`` started; the time it
        started is in ``GPUCHECK_LAUNCHED`` (seconds since the epoch)."""
        # --wait: the previous run's lease may still be on its way back to the pool.
        argv = [self.python, "-m", "radium.cli", "exec", *amount, "--wait", str(WAIT),
                "--remote", "torch", "--", self.client, *self._argv(what, args)]  # fmt: skip
        return self._start(argv, {**self.env, "GPUCHECK_LAUNCHED": f"{time.time():.6f}"})

    def remote(self, what: str, args: list[str], amount: list[str]) -> dict[str, Any]:
        return self.result(self.remote_start(what, args, amount), f"remoted {what}")

    def _start(self, argv: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            argv, env=env, cwd=self.cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.started.append(process)
        return process

    def stop_all(self) -> list[int]:
        """Stop the runs still going (the run was cut short): their pids."""
        going = [p for p in self.started if p.poll() is None]
        for process in going:
            stop(process)
        return [p.pid for p in going]

    def result(self, process: subprocess.Popen[str], what: str) -> dict[str, Any]:
        """The run's ``GPUCHECK`` line; WorkloadFailed with its last words otherwise. A run
        past the deadline is stopped by its pid."""
        try:
            out, err = process.communicate(timeout=self.deadline.left())
        except subprocess.TimeoutExpired:
            stop(process)
            raise WorkloadFailed(f"{what}: stopped at the deadline") from None
        found = [line for line in out.splitlines() if line.startswith(MARK)]
        if process.returncode != 0 or not found:
            words = (err.strip() or out.strip() or "(no output)").splitlines()[-3:]
            raise WorkloadFailed(f"{what} exited {process.returncode}: {' / '.join(words)}")
        result: dict[str, Any] = json.loads(found[-1][len(MARK) :])
        return result


def stop(process: subprocess.Popen[str]) -> None:
    """SIGTERM by its pid (``radium exec`` then releases its lease), SIGKILL after 10 s."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    with contextlib.suppress(ValueError, OSError):
        process.communicate(timeout=1)
