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
#: Ctrl-C's own handler first: a run started in the background by a shell without job control
#: inherits SIGINT ignored (so did a whole CI run started with `&`), and then no interrupt comes.
RESTORE = "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
PROGRAM = (
    """
import os, signal, sys, threading, time, traceback
import slow
"""
    + RESTORE
    + """

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
)


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


UNCAUGHT = (
    """
import os, signal, threading, time
import slow
"""
    + RESTORE
    + """


def interrupt_once_running():
    while not os.path.exists("running"):
        time.sleep(0.01)
    os.kill(os.getpid(), signal.SIGINT)


threading.Thread(target=interrupt_once_running, daemon=True).start()
print(slow.double(2), flush=True)
slow.nap("running", 5)
"""
)


def local_frames(stderr: str) -> list[str]:
    """The frames Python printed for the client's side (the remote traceback aside)."""
    local = stderr.split("Remote traceback:")[0]
    return [line.strip() for line in local.splitlines() if line.startswith("  File ")]


def test_an_uncaught_interrupt_or_remote_error_shows_the_program_s_frames_only(
    harness: WorkerHarness,
) -> None:
    (harness.root / "slow.py").write_text(SLOW)
    interrupted = harness.script(UNCAUGHT, remote="slow:nap,slow:double")
    assert interrupted.returncode == -2 and interrupted.stdout == "4\n", interrupted.stderr
    assert interrupted.stderr.splitlines()[-1] == "KeyboardInterrupt"
    assert [f.split("/")[-1] for f in local_frames(interrupted.stderr)] == [
        'app.py", line 16, in <module>'
    ]
    failed = harness.script("import slow\nslow.double(None)\n", remote="slow:double")
    assert failed.returncode == 1
    assert "\nTypeError: unsupported operand" in failed.stderr.split("Remote traceback:")[0]
    assert [f.split("/")[-1] for f in local_frames(failed.stderr)] == [
        'app.py", line 2, in <module>'
    ]
    # With RADIUM_DEBUG, Radium's own frames are shown, for whoever debugs it.
    debugged = harness.script("import slow\nslow.double(None)\n", remote="slow:double",
                              RADIUM_DEBUG="1")  # fmt: skip
    assert len(local_frames(debugged.stderr)) > 1
