"""Calls that wait, sent as the last record of a batch (data-plane version 3, docs/data-plane.md
"Waiting records"), end to end: a real worker, a client without numpy."""

from __future__ import annotations

from tests.interposer.harness import WorkerHarness
from tests.interposer.test_batches import counts

READS = """
import numpy as np

a = np.arange(12.0)
seen = []
for i in range(100):
    a = a * 0.5 + i
    seen.append(a.sum().item())  # item() waits: its result comes back by value
    if a.max().item() > 50.0:  # a comparison in an if
        seen.append(len(a.tolist()))
print(seen[:3], seen[-3:], len(seen))
b = a.reshape(3, 4)
print(b.shape, b.ndim, b.dtype, b.tolist())
"""


def test_waiting_calls_go_as_records_with_the_local_result(harness: WorkerHarness) -> None:
    stats = harness.root / "stats.jsonl"
    out = harness.same_as_local(READS, remote="numpy", RADIUM_STATS_FILE=str(stats))
    seen = counts(stats)
    # Each item() after the site's first call, and each max().item() of the if.
    assert seen["waited"] >= 190 and seen["waited"] <= seen["round_trips"], seen
    stats.unlink()
    as_json = harness.program(
        harness.root / "app.py", "numpy", RADIUM_BINARY_WAITS="0", RADIUM_STATS_FILE=str(stats)
    )
    assert as_json.returncode == 0, as_json.stderr
    assert as_json.stdout == out and counts(stats)["waited"] == 0


RAISES = """
import numpy as np

a = np.arange(6.0)
for n in (3, 2, 4):
    try:
        print(a.reshape(n, -1).shape)  # in a try: each waits; the third raises here
    except ValueError as exc:
        print("caught", exc)
"""


def test_a_waiting_record_that_raises_raises_at_its_call(harness: WorkerHarness) -> None:
    stats = harness.root / "stats.jsonl"
    done = harness.script(RAISES, remote="numpy", RADIUM_STATS_FILE=str(stats))
    assert done.stdout.splitlines() == [
        "(3, 2)",
        "(2, 3)",
        "caught cannot reshape array of size 6 into shape (4,newaxis)",
    ], done
    assert done.returncode == 0, done.stderr
    assert counts(stats)["waited"] >= 2  # the calls after each site's first went as records


POISONED = """
import numpy as np

a = np.arange(5.0)
for n in (5, 5, 7):
    b = a.reshape(n)  # the third is a streamed record that raises on the worker
d = np.ndim(a)  # waits, as a record: the reshape's error is its answer
print(d)  # never: locally the program stopped at the reshape
"""


def test_a_poisoned_connection_answers_a_waiting_record_with_the_streamed_error(
    harness: WorkerHarness,
) -> None:
    stats = harness.root / "stats.jsonl"
    done = harness.script(POISONED, remote="numpy", RADIUM_STATS_FILE=str(stats))
    assert done.returncode == 1 and done.stdout == "", done
    lines = done.stderr.strip().splitlines()
    assert "ValueError: cannot reshape array of size 5 into shape (7,)" in lines, done.stderr
    assert lines[-1].endswith("app.py:6, reported here"), done.stderr
    assert counts(stats)["waited"] == 2  # the first reshape and np.ndim


NO_CALL = """
import numpy as np
from radium_interposer import client, wire

a = np.arange(3.0)
conn = client.state.connection()
wire.send_chunks(conn.sock, wire.encode_batch(9, b""))  # waits on a batch without a call
try:
    float(a.sum())
except Exception as exc:
    print(type(exc).__name__)
print(float(a.sum()))  # a new connection: the worker and its objects are still there
"""


def test_a_waiting_batch_without_a_call_closes_its_connection_only(
    harness: WorkerHarness,
) -> None:
    assert harness.check(NO_CALL, remote="numpy").split() == ["WorkerGone", "3.0"]
    assert "binary batch is malformed: call 9 waits on a batch without a call" in harness.log()
