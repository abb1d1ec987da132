"""A streamed call's error at a fork (docs/data-plane.md, "Streamed calls that return
nothing"): ``os.fork()`` raises it before there are two processes; a fork the at-fork hook
sees (it cannot raise) leaves it for the parent's next sync point instead of losing it."""

from __future__ import annotations

from tests.interposer.harness import WorkerHarness

FAILED_BEFORE = """
import os
import subprocess
import sys

import torch

x = torch.ones(3, requires_grad=True)
for i in range(2):
    z = (x * 3).sum()
    z.backward()
    if i == 1:
        z.backward()  # the graph is freed: raises on the worker, streamed
{fork}
try:
    print("reached")
except RuntimeError as error:
    print("caught at the print:", error.__notes__[-1].rsplit(":", 1)[-1])
"""

OS_FORK = """
try:
    pid = os.fork()
except RuntimeError as error:
    print("caught at the fork:", error.__notes__[-1].rsplit(":", 1)[-1])
else:
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    print("forked")
"""

HOOKED_FORK = """
# preexec_fn: _posixsubprocess forks and runs the at-fork hooks, which cannot raise.
subprocess.run([sys.executable, "-c", "print('child ran')"], preexec_fn=lambda: None, check=True)
"""


def test_os_fork_raises_a_streamed_error_before_forking(harness: WorkerHarness) -> None:
    done = harness.script(FAILED_BEFORE.format(fork=OS_FORK), remote="torch")
    assert done.returncode == 0, done.stderr
    # As locally, no second process: the error is raised at the fork (line 13 made the call:
    # the file starts with a blank line).
    assert done.stdout.splitlines() == ["caught at the fork: 13, reported here", "reached"]


def test_a_fork_the_hook_sees_leaves_the_error_to_the_next_sync_point(
    harness: WorkerHarness,
) -> None:
    done = harness.script(FAILED_BEFORE.format(fork=HOOKED_FORK), remote="torch")
    assert done.returncode == 0, done.stderr
    # Before quiet barriers, the hook swallowed the error and "reached" was printed.
    assert done.stdout.splitlines() == ["child ran", "caught at the print: 13, reported here"]
