"""Calls stream while the program's ``random`` is synced; a draw here first takes the worker's
state (docs/remoting.md, "Random generators"; radium_interposer.local_draws and worker_state):
each program prints what it prints locally, with few round trips."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from radium_interposer import program_state, rng_state, worker_state
from tests.interposer.harness import WorkerHarness
from tests.interposer.test_batches import counts

STREAMED = """
import random

import torch
from torch import nn

random.seed(0)


class Noisy(nn.Module):
    def forward(self, x):
        return x * random.random() + random.randint(0, 9)


model = Noisy()
total = torch.zeros(3)
for step in range(60):
    total = total + model(torch.ones(3))  # streamed: its result stays remote
    if step % 20 == 19:
        print(step, "drawn here", random.random(), random.choice("abcdef"))
    if step == 30:
        random.seed(7)  # seeded here between streamed calls: the worker's next draws follow it
print([round(v, 6) for v in total.tolist()])
print("after", random.random(), random.getstate()[1][:2])
"""


def test_calls_stream_and_a_draw_here_takes_the_worker_s_state(
    harness: WorkerHarness, tmp_path: Path
) -> None:
    stats = tmp_path / "stats.jsonl"
    out = harness.same_as_local(STREAMED, RADIUM_STATS_FILE=str(stats))
    assert len(out.splitlines()) == 5
    seen = counts(stats)
    # Every call waited before (one round trip each: > 120); now the program's draws, the
    # prints and the first calls of each site wait.
    assert seen["streamed"] >= 100 and seen["round_trips"] < 30, seen


FORKED = """
import os
import random

import torch
from torch import nn

random.seed(1)


class Noisy(nn.Module):
    def forward(self, x):
        return x + random.random()


model = Noisy()
y = torch.zeros(1)
for _ in range(10):
    y = model(y)  # streamed, each drawing on the worker
pid = os.fork()
if pid == 0:  # Python reseeds a child's generator: seeded again, to print the same each run
    random.seed(5)
    print("child", random.random(), model(y).item(), flush=True)
    os._exit(0)
os.waitpid(pid, 0)
print("parent", model(y).item(), random.random())
"""


def test_a_forked_child_s_draws_leave_the_parent_s_generator_as_its_calls_left_it(
    harness: WorkerHarness,
) -> None:
    """The child's calls draw from the worker's generator too (its connection sends its own
    state); the parent's next call goes on from where its streamed calls left it."""
    out = harness.same_as_local(FORKED)
    assert [line.split()[0] for line in out.splitlines()] == ["child", "parent"]


class _Session:
    """A worker session or a client connection, as the state tables key them (weakly)."""

    running = 1


def _call(session: _Session, sent: Any = None, waits: bool = True) -> dict[str, Any]:
    """One call of ``session`` on the worker that draws once; its answer's metadata."""
    meta: dict[str, Any] = {"ps": {"random": sent}}
    if not waits:
        meta["nr"] = 1
    worker_state.begin(session, meta, [])
    random.random()
    reply: dict[str, Any] = {}
    worker_state.end(session, meta, reply, [])
    return reply


def test_each_connection_s_calls_go_on_from_where_its_own_left_the_generator() -> None:
    """Two connections of one lease (a parent and its forked child) share the worker's
    generator: each one's calls, streamed ones too, go on from its own last draw."""
    first, second = _Session(), _Session()
    random.seed(3)
    start = rng_state.dump("random", rng_state.get("random"))
    _call(first, start)
    _call(first, waits=False)  # streamed: no answer, the generator moved on
    _call(second, start)  # the child's copy: from the same state
    reply = _call(first)  # the first connection's calls go on from their own third draw
    expected = random.Random()
    expected.seed(3)
    for _ in range(3):
        expected.random()
    assert rng_state.load("random", reply["ps"]["random"]) == expected.getstate()
    assert _call(second)["ps"]["random"] is not None  # and the second's from its own


def test_an_answer_says_when_nothing_changed() -> None:
    """A waiting call's answer carries ``ps`` even when no state changed, so the client knows
    it has the worker's states (its streamed calls' draws included)."""
    session = _Session()
    state = rng_state.dump("random", rng_state.get("random"))
    meta: dict[str, Any] = {"ps": {"random": state}}
    worker_state.begin(session, meta, [])
    reply: dict[str, Any] = {}
    worker_state.end(session, meta, reply, [])
    assert reply == {"ps": {}}


def test_only_generators_whose_draws_are_seen_let_calls_stream(monkeypatch: Any) -> None:
    monkeypatch.setattr(program_state, "kinds", {"random"})
    monkeypatch.setattr(program_state, "_streamable", set())
    assert program_state.holds_calls()
    monkeypatch.setattr(program_state, "_streamable", {"random"})
    assert not program_state.holds_calls()
    monkeypatch.setattr(program_state, "kinds", {"random", "numpy"})
    assert program_state.holds_calls()  # numpy draws in C, unseen


def test_a_call_reads_the_program_s_state_only_after_it_moved_here(monkeypatch: Any) -> None:
    """Reading and comparing ``random``'s 625 numbers took ~13 µs of every call: a call reads
    them only when a draw here (local_draws marks each) or an answer moved them since."""
    reads: list[str] = []
    real = rng_state.get
    monkeypatch.setattr(rng_state, "get", lambda kind: reads.append(kind) or real(kind))
    monkeypatch.setattr(program_state, "kinds", {"random"})
    monkeypatch.setattr(program_state, "_streamable", {"random"})
    monkeypatch.setattr(program_state, "stale", set())
    conn = _Session()  # a connection, as the client's tables key it (weakly)

    def ps() -> Any:
        meta: dict[str, Any] = {}
        program_state.before_call(conn, meta)  # type: ignore[arg-type]
        return meta["ps"]["random"]

    assert ps() is not None and len(reads) == 1  # the first call sends the state
    assert ps() is None and len(reads) == 1  # nothing moved: not read again
    random.random()
    program_state.moved[0] = next(program_state.moves)  # what local_draws does after a draw
    assert ps() is not None and len(reads) == 2
    program_state.after_call(conn, {"random": rng_state.dump("random", real("random"))})  # type: ignore[arg-type]
    assert ps() is None and len(reads) == 2  # the worker's state is the one this side has
