"""Ctrl-C during a remote call (issue 35, item 10): the program that catches it sees where its
call went remote, not the interposer's socket reads, and its next calls get their own answers."""

from __future__ import annotations

from tests.interposer.harness import WorkerHarness

SLOW = """
import time


def nap(marker, seconds):
    open(marker, "w").close()  # the worker runs it: the client is waiting for the answer
    time.sleep(seconds)
    return "nap's answer"


def double(x):
    return 2 * x
"""
PROGRAM = """
import os, signal, sys, threading, time, traceback
import slow

MARKER = "running"


def interrupt_once_running():
    while not os.path.exists(MARKER):
        time.sleep(0.01)
    os.kill(os.getpid(), signal.SIGINT)


threading.Thread(target=interrupt_once_running, daemon=True).start()
try:
    slow.nap(MARKER, 5)
except KeyboardInterrupt:
    traceback.print_exc(file=sys.stdout)
print("next:", slow.double(21), slow.double(1))
"""


def test_a_caught_interrupt_shows_no_socket_reads_and_the_next_call_gets_its_answer(
    harness: WorkerHarness,
) -> None:
    (harness.root / "slow.py").write_text(SLOW)
    done = harness.script(PROGRAM, remote="slow:nap,slow:double")
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert out[0] == "Traceback (most recent call last):" and out[-2] == "KeyboardInterrupt", out
    assert "in <module>\n    slow.nap(MARKER, 5)\n" in done.stdout  # the program's own call
    frames = [line for line in out if line.startswith("  File ")]
    assert not [f for f in frames if "wire.py" in f or "socket.py" in f], frames
    assert out[-1] == "next: 42 2"  # not the interrupted call's answer, read out of step
    assert harness.worker.poll() is None
