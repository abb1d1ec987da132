"""A worker's data-plane counters, asked for on its control socket (docs/data-plane.md,
"Workers"): what the acceptor reads is what the program's calls did, and nothing a worker
(the tenant's code) sends is taken unchecked."""

from __future__ import annotations

import json
import socket
import time

import pytest

from radium_interposer import control
from tests.interposer.harness import WorkerHarness

PROGRAM = """
import json
import numpy as np
from radium_interposer import proxy

sent = np.frombuffer(bytes(32768), dtype=np.uint8)
assert len((sent + 1).tobytes()) == 32768
try:
    np.linalg.inv(np.zeros((2, 2)))
except np.linalg.LinAlgError:
    pass
print(json.dumps(proxy.stats()))
"""


def _answer(reader: control.CountersReader, sock: socket.socket) -> control.Counters:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        counters = reader.poll(sock)
        if counters is not None:
            return counters
        time.sleep(0.05)
    raise AssertionError("the worker never answered its counters")


def test_the_acceptor_reads_what_the_program_s_calls_did(harness: WorkerHarness) -> None:
    assert harness.control.recv(1) == control.READY  # what the acceptor's start reads
    reader = control.CountersReader()
    before = _answer(reader, harness.control)
    assert before == {"calls": 0, "bytes_in": 0, "bytes_out": 0, "busy_seconds": 0.0, "errors": 0}
    done = harness.run(PROGRAM)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    # Asked once more after the program ended: the calls it saw, its stats call, and the
    # bookkeeping of its connection's end (releases) at most.
    reader.poll(harness.control)
    time.sleep(0.5)
    after = reader.poll(harness.control)
    assert after is not None
    assert seen["calls"] + 1 <= after["calls"] <= seen["calls"] + 3
    assert after["errors"] >= 1 and seen["errors"] >= 1  # the singular matrix
    assert after["bytes_in"] >= 32768 and after["bytes_out"] >= 32768
    assert after["busy_seconds"] > 0


GOOD = {"calls": 3, "bytes_in": 10, "bytes_out": 20, "busy_seconds": 0.5, "errors": 0}


@pytest.mark.parametrize(
    "value",
    [
        {k: v for k, v in GOOD.items() if k != "errors"},
        {**GOOD, "extra": 1},
        {**GOOD, "calls": -1},
        {**GOOD, "calls": 1.5},
        {**GOOD, "calls": True},
        {**GOOD, "bytes_in": 2**63},
        {**GOOD, "busy_seconds": "1"},
        [1, 2, 3],
    ],
)
def test_counters_that_are_not_plain_bounded_numbers_are_refused(value: object) -> None:
    assert control.checked_counters(json.dumps(value).encode()) is None


def test_non_finite_and_non_json_counters_are_refused() -> None:
    assert control.checked_counters(json.dumps(GOOD).encode()) == GOOD
    assert control.checked_counters(json.dumps(GOOD).replace("0.5", "NaN").encode()) is None
    assert control.checked_counters(b"\xff{") is None


def _read(*chunks: bytes) -> list[control.Counters | None]:
    """What the reader holds after each chunk a worker sent."""
    ours, theirs = socket.socketpair()
    reader, held = control.CountersReader(), []
    with ours, theirs:
        for chunk in chunks:
            theirs.sendall(chunk)
            held.append(reader.read(ours))
    return held


def test_answers_split_or_glued_by_the_kernel_are_read_whole() -> None:
    first = control.counters_message(GOOD)
    second = control.counters_message({**GOOD, "calls": 4})
    held = _read(first[:5], first[5:] + second[:2], second[2:])
    assert held == [None, GOOD, {**GOOD, "calls": 4}]


def test_garbage_from_a_worker_is_dropped_and_later_answers_still_count() -> None:
    huge = control.COUNTERS + (control.MAX_COUNTERS + 1).to_bytes(4, "big")
    bad = b'{"calls": -5}'
    malformed = control.COUNTERS + len(bad).to_bytes(4, "big") + bad
    good = control.counters_message(GOOD)
    assert _read(b"zzz", good) == [None, GOOD]
    assert _read(huge, good) == [None, GOOD]
    assert _read(malformed, good) == [None, GOOD]
    assert _read(b"s" * (control.MAX_UNREAD + 10), good) == [None, GOOD]
