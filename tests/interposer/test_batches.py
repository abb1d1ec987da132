"""Streamed calls as binary records, end to end: a real worker, a client without numpy
(docs/data-plane.md, "Batches")."""

from __future__ import annotations

import json
from pathlib import Path

from tests.interposer.harness import WorkerHarness

CHAINS = """
import numpy as np

a = np.arange(12.0)
for i in range(200):
    a = a * 0.5 + i  # a float and an int slot, a handle slot
    b = a.reshape(3, 4).sum(axis=1, keepdims=True)  # constants: the axis is an int slot
    c = np.add(b, 2, dtype=np.float32)  # a path constant
    d = np.clip(a, None, 50.0)  # None constant
print(a.tolist())
print(b.tolist(), c.dtype, c.tolist())
print(d.tolist())
"""


def counts(path: Path) -> dict[str, int]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return {key: sum(line[key] for line in lines) for key in ("calls", "records", "round_trips")}


def test_common_calls_go_as_records_with_the_local_result(harness: WorkerHarness) -> None:
    stats = harness.root / "stats.jsonl"
    out = harness.same_as_local(CHAINS, remote="numpy", RADIUM_STATS_FILE=str(stats))
    seen = counts(stats)
    # Every site's first call waits; after that each loop's calls are records.
    assert seen["records"] >= 199 * 5, seen
    assert seen["round_trips"] < 40, seen
    stats.unlink()
    as_json = harness.program(
        harness.root / "app.py", "numpy", RADIUM_BINARY="0", RADIUM_STATS_FILE=str(stats)
    )
    assert as_json.returncode == 0, as_json.stderr
    assert as_json.stdout == out and counts(stats)["records"] == 0


FAILS_LATER = """
import numpy as np

a = np.arange(5.0)
for n in (5, 5, 7):
    b = a.reshape(n)  # the third is a record that raises on the worker
print("streamed")
print(float(b.sum()))
"""


def test_a_record_that_raises_raises_at_the_next_use_of_its_result(
    harness: WorkerHarness,
) -> None:
    done = harness.script(FAILS_LATER, remote="numpy")
    assert done.returncode == 1 and done.stdout == "streamed\n", done
    assert done.stderr.strip().splitlines()[-1] == (
        "ValueError: cannot reshape array of size 5 into shape (7,)"
    ), done.stderr


RELEASED = """
import numpy as np
from radium_interposer import proxy

a = np.arange(4.0)
for _ in range(5000):
    a = a + 1
print(float(a.sum()), proxy.stats()["handles"])
"""


def test_released_handles_go_with_the_batch(harness: WorkerHarness) -> None:
    total, handles = harness.check(RELEASED, remote="numpy").split()
    assert float(total) == 4 * 5000 + 6.0
    assert int(handles) < 50  # 5000 results made; those the program dropped were freed


MALFORMED = """
import numpy as np
from radium_interposer import client, wire

a = np.arange(3.0)
conn = client.state.connection()
wire.send_chunks(conn.sock, wire.encode_batch(0, b"Z"))  # an unknown record kind
try:
    float(a.sum())
except Exception as exc:
    print(type(exc).__name__)
print(float(a.sum()))  # a new connection: the worker and its objects are still there
"""


def test_a_malformed_batch_closes_its_connection_only(harness: WorkerHarness) -> None:
    assert harness.check(MALFORMED, remote="numpy").split() == ["WorkerGone", "3.0"]
    assert "binary batch is malformed: unknown record kind 90" in harness.log()
