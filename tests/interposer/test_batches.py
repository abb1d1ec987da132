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
    """A RADIUM_STATS_FILE's counts, summed over its processes."""
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return {key: sum(line[key] for line in lines) for key in lines[0] if key != "pid"}


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


def test_a_record_that_raises_raises_at_the_next_point_that_waits(
    harness: WorkerHarness,
) -> None:
    done = harness.script(FAILS_LATER, remote="numpy")
    # The print waits first: the error is raised there, before its output, as a local run
    # raises it at the reshape, before the print.
    assert done.returncode == 1 and done.stdout == "", done
    lines = done.stderr.strip().splitlines()
    assert "ValueError: cannot reshape array of size 5 into shape (7,)" in lines, done.stderr
    assert lines[-1].endswith("app.py:6, reported here"), done.stderr


DROPPED = """
import torch

x = torch.ones(3)
for i in range(3):
    x.add_(torch.ones(3))  # its site returns a remote tensor: the next ones stream
x.add_(torch.ones(4))  # raises on the worker; the program drops its result
print(x)
"""


def test_the_error_of_a_streamed_call_whose_result_is_dropped_is_raised(
    harness: WorkerHarness,
) -> None:
    done = harness.script(DROPPED, remote="torch")
    assert done.returncode == 1 and done.stdout == "", done  # never a silent wrong x
    lines = done.stderr.strip().splitlines()
    assert (
        "RuntimeError: The size of tensor a (3) must match the size of tensor b (4) at"
        " non-singleton dimension 0"
    ) in lines, done.stderr
    assert lines[-1].endswith("app.py:7, reported here"), done.stderr


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


TRAINING = """
import torch

torch.manual_seed(0)
x = torch.linspace(-1, 1, 200).unsqueeze(1)
y = x.pow(3) + 0.1 * torch.randn(x.size())
model = torch.nn.Sequential(torch.nn.Linear(1, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = torch.nn.MSELoss()
for t in range(300):
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    if t % 100 == 99:
        print(t, loss.item())
"""


def test_a_training_loop_streams_its_steps_with_the_local_result(harness: WorkerHarness) -> None:
    stats = harness.root / "stats.jsonl"
    harness.same_as_local(TRAINING, remote="torch", RADIUM_STATS_FILE=str(stats))
    seen = counts(stats)
    # zero_grad, backward and step return nothing: streamed once seen; 3 loss reads.
    assert seen["records"] >= 299 * 5 and seen["round_trips"] < 40, seen


FAILS_SILENTLY = """
import torch

x = torch.ones(3, requires_grad=True)
w = torch.zeros(3)
w[1] = 1.0
for i in range(2):
    z = (x * 3).sum()
    z.backward()
    if i == 1:
        z.backward()  # the graph is freed: raises on the worker, streamed
        w[0] = 9.0  # streamed after the failure: must not run
try:
    print("reached")  # the print waits first: the error is raised here
except RuntimeError as error:
    sys_note = error.__notes__[-1]
    print("caught:", sys_note.rsplit(":", 1)[-1])
print(w.tolist())
"""


def test_a_streamed_call_that_returns_nothing_raises_at_the_next_print(
    harness: WorkerHarness,
) -> None:
    done = harness.script(FAILS_SILENTLY, remote="torch")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["caught: 11, reported here", "[0.0, 1.0, 0.0]"]


FAILS_AT_EXIT = """
import torch

x = torch.ones(3, requires_grad=True)
for i in range(3):
    z = (x * 3).sum()
    z.backward()
z.backward()
"""


def test_an_error_streamed_at_the_end_is_the_program_s_uncaught_exception(
    harness: WorkerHarness,
) -> None:
    done = harness.script(FAILS_AT_EXIT, remote="torch")
    assert done.returncode == 1, done
    lines = done.stderr.strip().splitlines()
    assert lines[-1].endswith("app.py:8, reported here"), done.stderr
    assert any(line.startswith("RuntimeError: Trying to backward") for line in lines)


IN_A_REMOTE_WITH = """
import numpy as np

a = np.zeros(3)
a[0] = 1.0  # its site returns nothing: the next assignments stream
with np.testing.assert_raises(IndexError):
    a[10] = 1.0
a[1] = 2.0
print(a.tolist())
"""


def test_a_remote_with_body_s_streamed_error_reaches_its_manager(harness: WorkerHarness) -> None:
    assert harness.same_as_local(IN_A_REMOTE_WITH, remote="numpy") == "[1.0, 2.0, 0.0]\n"


NO_GRAD = """
import torch

torch.manual_seed(0)
x = torch.linspace(-3.14, 3.14, 200)
y = torch.sin(x)
a, b = (torch.randn((), requires_grad=True) for _ in range(2))
for t in range(100):
    loss = (a + b * x - y).pow(2).sum()
    loss.backward()
    with torch.no_grad():  # its enter and exit stream: what the enter returns is dropped
        a -= 1e-4 * a.grad
        b -= 1e-4 * b.grad
        a.grad = None
        b.grad = None
print(torch.is_grad_enabled(), a.item(), b.item())
with torch.no_grad() as kept:  # kept: this enter waits for what it returns
    print(kept, torch.is_grad_enabled())
"""


def test_a_remote_with_whose_enter_result_is_dropped_costs_no_round_trip(
    harness: WorkerHarness,
) -> None:
    stats = harness.root / "stats.jsonl"
    out = harness.same_as_local(NO_GRAD, remote="torch", RADIUM_STATS_FILE=str(stats))
    assert out.splitlines()[-1] == "None False"
    # Per step: the two .grad reads wait (a grad may be None); enter and exit do not.
    assert counts(stats)["round_trips"] < 2 * 100 + 30, counts(stats)
