"""A preemption notice, from the acceptor's control socket to the program's ``except``
(docs/data-plane.md, "Workers"; docs/scheduling.md, "Preemption")."""

from __future__ import annotations

import os
import socket

from radium_interposer import control, wire
from tests.interposer.harness import WorkerHarness

NOTICE = "lease L1 of queue 'a' was preempted for queue 'b': save your work"
PROGRAM = """
import numpy as np
from radium_interposer import LeasePreempted

try:
    total = float(np.ones(3).sum())
except LeasePreempted as exc:
    print("told:", exc)
    total = float(np.ones(3).sum())  # calls still run during the grace period
print(total)
"""


def test_each_connection_s_next_call_raises_the_notice_once(harness: WorkerHarness) -> None:
    # Before the notice the same program is never told: the check can fail.
    assert harness.check(PROGRAM).splitlines() == ["3.0"]
    harness.control.sendall(control.notice(NOTICE))
    assert harness.check(PROGRAM).splitlines() == [f"told: {NOTICE}", "3.0"]
    # A new process of the program (a new connection) is told too, and the message is the
    # pool's own, with no remote traceback to point at.
    again = harness.run(PROGRAM.replace('print("told:", exc)', "print(repr(exc.__cause__))"))
    assert again.stdout.splitlines() == ["None", "3.0"], again.stderr


def _events(*chunks: tuple[bytes, bool]) -> list[tuple[str, object]]:
    """What ``control.serve`` does with messages arriving in these reads (True: with an fd)."""
    ours, theirs = socket.socketpair()
    spare = [socket.socketpair() for _ in chunks]
    events: list[tuple[str, object]] = []
    with ours:
        with theirs:
            for (data, with_fd), (a, _) in zip(chunks, spare):
                if with_fd:
                    wire.send_fd(theirs, data, a.fileno())
                else:
                    theirs.sendall(data)
        control.serve(
            ours,
            lambda fd: (events.append(("connection", fd)), os.close(fd)),
            lambda text: events.append(("notice", text)),
        )
    for a, b in spare:
        a.close()
        b.close()
    return events


def test_messages_glued_or_split_by_the_kernel_are_parsed_whole() -> None:
    message = control.notice("preempted ünïcode")
    events = _events(
        (message[:3], False),  # a notice split over reads
        (message[3:] + control.CONNECTION, True),  # its end glued to a connection
        (control.notice("again") + control.notice("twice"), False),
    )
    kinds = [kind for kind, _ in events]
    assert kinds == ["notice", "connection", "notice", "notice"]
    assert [value for kind, value in events if kind == "notice"] == [
        "preempted ünïcode",
        "again",
        "twice",
    ]


def test_garbage_and_oversized_notices_are_dropped_not_obeyed() -> None:
    huge = control.NOTICE + (control.MAX_NOTICE + 1).to_bytes(4, "big") + b"x"
    assert _events((control.notice("ok"), False)) == [("notice", "ok")]
    assert _events((b"zzz" + control.notice("ok"), False)) == []
    assert _events((huge, False)) == []
