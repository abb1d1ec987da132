"""The client's express lane (docs/data-plane.md, "The client's express lane"): a plan learned
from a call the full path streamed sends the same record, and every check of the plan that fails
sends the call back down the full path. In process with a stand-in connection; then end to end,
a real worker, a client without numpy or torch."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import pytest

from radium_interposer import (
    callbacks,
    cwd,
    express,
    known,
    peer,
    program_state,
    proxy,
    records,
    templates,
    tensor_sync,
)
from radium_interposer import client_warnings as warns
from tests.interposer.harness import WorkerHarness


class Connection:
    """What the express lane uses of a connection; its records are kept in ``sent``."""

    def __init__(self) -> None:
        self.templates = templates.Templates()
        self.serving: List[int] = []
        self.cwd = os.getcwd()
        self.unsynced = 0
        self.sent = bytearray()
        peer.describe(self, {})  # the worker has heard what there is to say

    def stream(self, record: bytes) -> None:
        self.sent += record


SITE = "torch.nn.functional.thing"
TYPED = SITE + "|torch.Tensor,,,,,,"
PATH = {"$": "p", "p": SITE}


def tensor(conn: Connection, handle: int = 5) -> Any:
    return proxy.make({"$": "h", "id": handle}, "torch.Tensor", conn)  # type: ignore[arg-type]


def learned(
    conn: Connection,
    function: Dict[str, Any],
    args: Tuple[Any, ...],
    site: str = SITE,
    **kwargs: Any,
) -> Any:
    """The full path's record of this call (its template defined) and the plan it leaves."""
    made = conn.templates.record(function, args, kwargs, 1, TYPED, proxy.reference)
    assert made is not None and made[0] == records.DEFINE
    conn.sent += made
    express.learn(conn, function, args, kwargs, site, TYPED, "torch.Tensor", proxy)  # type: ignore[arg-type]
    return conn.templates.plans[express.key(function, args, kwargs, site)]


def send(conn: Connection, plan: Any, function: Dict[str, Any], *args: Any, **kwargs: Any) -> Any:
    """The plan's send, the site predicted to return a tensor."""
    return express.send(conn, plan, function, args, kwargs, {TYPED: "torch.Tensor"})  # type: ignore[arg-type]


def sent_calls(conn: Connection) -> List[Tuple[Any, ...]]:
    return [r for r in records.Reader().parse(bytes(conn.sent)) if r[0] == "C"]


def test_a_plan_sends_the_record_the_full_path_makes() -> None:
    conn = Connection()
    x = tensor(conn, 5)
    args = (x, 3, 2.5, "mean", None, True)
    plan = learned(conn, PATH, args, dim=1)
    other = tensor(conn, 6)
    result = send(conn, plan, PATH, other, 4, 0.5, "mean", None, True, dim=2)
    assert isinstance(result, proxy.Remote) and result._rd_type == "torch.Tensor"
    first, second = sent_calls(conn)
    assert second[1] == first[1]  # the same template
    assert second[3] == (6, 4, 0.5, 2)  # handle, int, float, the keyword's int
    assert second[2] == result._rd_ref["id"]
    # The full path would have made exactly that record.
    again = (other, 4, 0.5, "mean", None, True)
    full = conn.templates.record(PATH, again, {"dim": 2}, second[2], TYPED, proxy.reference)
    assert full == bytes(conn.sent[-len(full) :])


def test_a_method_and_a_callable_slot_come_first() -> None:
    conn = Connection()
    x, y = tensor(conn, 5), tensor(conn, 6)
    method = {"$": "a", "o": {"$": "h", "id": 5}, "n": "add"}
    plan = learned(conn, method, (y,))
    send(conn, plan, {"$": "a", "o": {"$": "h", "id": 9}, "n": "add"}, x)
    model = {"$": "h", "id": 7}
    plan = learned(conn, model, (x,))
    send(conn, plan, {"$": "h", "id": 8}, y)
    calls = sent_calls(conn)
    assert calls[1][3] == (9, 5) and calls[3][3] == (8, 6)


#: Each way a later call may differ from its plan, or the client's state from when it was made.
#: (the connection, the arguments, the callable, the predictions): changed in place.
Change = Callable[[Connection, List[Any], Dict[str, Any], Dict[str, Any]], Any]
DIVERGENCES: Dict[str, Change] = {
    "a string constant": lambda c, a, f, p: a.__setitem__(3, "sum"),
    "a bool constant": lambda c, a, f, p: a.__setitem__(5, False),
    "an int past int64": lambda c, a, f, p: a.__setitem__(1, 1 << 63),
    "a proxy that is no handle": lambda c, a, f, p: a.__setitem__(
        0,
        proxy.make({"$": "sv", "dt": "<f4", "b": "AAAAAA=="}, "torch.Tensor", c),  # type: ignore[arg-type]
    ),
    "another path at the site": lambda c, a, f, p: f.__setitem__("p", "torch.other"),
    "the site's prediction": lambda c, a, f, p: p.__setitem__(TYPED, "torch.Size"),
    "a callback being served": lambda c, a, f, p: c.serving.append(3),
    "another working directory": lambda c, a, f, p: setattr(c, "cwd", "/elsewhere"),
    "something new to tell": lambda c, a, f, p: delattr(c, peer._TOLD),
}
ARGS = (3, 2.5, "mean", None, True)


@pytest.mark.parametrize("change", DIVERGENCES)
def test_a_call_that_differs_from_its_plan_takes_the_full_path(change: str) -> None:
    conn = Connection()
    plan = learned(conn, PATH, (tensor(conn), *ARGS))
    args, function, predictions = [tensor(conn), *ARGS], dict(PATH), {TYPED: "torch.Tensor"}
    DIVERGENCES[change](conn, args, function, predictions)
    before = len(conn.sent)
    assert express.send(conn, plan, function, tuple(args), {}, predictions) is express.MISS  # type: ignore[arg-type]
    assert len(conn.sent) == before
    # Its check is what made it miss: unchanged, the same plan sends.
    assert send(Connection(), plan, PATH, tensor(conn), *ARGS) is not express.MISS


@pytest.mark.parametrize("state", ["tracking", "syncing", "held", "warned"])
def test_nothing_goes_by_plan_while_calls_must_wait(
    state: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = Connection()
    plan = learned(conn, PATH, (tensor(conn),))
    waits = {
        "tracking": lambda: monkeypatch.setattr(tensor_sync, "tracking", lambda: True),
        "syncing": lambda: monkeypatch.setattr(program_state, "syncing", lambda: True),
        "held": lambda: monkeypatch.setattr(callbacks, "held", lambda: True),
        "warned": lambda: monkeypatch.setattr(warns, "sites", {TYPED}),
    }
    waits[state]()
    assert send(conn, plan, PATH, tensor(conn)) is express.MISS


def test_a_change_of_working_directory_takes_the_full_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The lane reads the directory once and again after os.chdir (wrapped by cwd.install, as
    # finder.install does): the call that follows a change tells the worker by the full path.
    cwd.install()
    conn = Connection()
    plan = learned(conn, PATH, (tensor(conn),))
    assert send(conn, plan, PATH, tensor(conn)) is not express.MISS
    monkeypatch.chdir(tmp_path)
    assert send(conn, plan, PATH, tensor(conn)) is express.MISS
    # A change that bypassed os.chdir is seen once a call went the full path (it reads afresh).
    conn.cwd = str(tmp_path)
    os.chdir.__wrapped__("/")  # type: ignore[attr-defined]
    assert cwd.current() == str(tmp_path) and cwd.refresh() == "/"
    assert send(conn, plan, PATH, tensor(conn)) is express.MISS


def test_a_call_in_a_try_body_takes_the_full_path() -> None:
    conn = Connection()
    plan = learned(conn, PATH, (tensor(conn),))
    predictions = {TYPED: "torch.Tensor"}
    try:  # the program's frame is this one: its error must be raised here, so it waits
        sent = express.send(conn, plan, PATH, (tensor(conn),), {}, predictions)  # type: ignore[arg-type]
    except RuntimeError:
        sent = None
    assert sent is express.MISS
    assert express.send(conn, plan, PATH, (tensor(conn),), {}, predictions) is not express.MISS  # type: ignore[arg-type]


def test_kept_metadata_is_forgotten_by_a_call_that_may_change_it() -> None:
    conn = Connection()
    resize = {"$": "a", "o": {"$": "h", "id": 5}, "n": "resize_"}
    plan = learned(conn, resize, (3,), site="torch.Tensor.resize_")
    assert not plan.harmless
    known.answers[(5, "shape")] = (4,)
    send(conn, plan, resize, 3)
    assert not known.answers
    mul = learned(conn, {"$": "p", "p": "operator.mul"}, (tensor(conn), 2.0), site="t|mul|0")
    assert mul.harmless
    known.answers[(5, "shape")] = (4,)
    send(conn, mul, {"$": "p", "p": "operator.mul"}, tensor(conn), 3.0)
    assert known.answers == {(5, "shape"): (4,)}
    known.forget()


@pytest.mark.parametrize(
    "args",
    [
        (proxy.Remote({"$": "p", "p": "torch.float32"}, "", None),),  # a plain proxy: a path
        (int,),  # a class: its name goes into the typed site
        ([1, 2],),
        (os,),
    ],
    ids=["a path's proxy", "a class", "a list", "a module"],
)
def test_arguments_the_full_path_looks_into_get_no_plan(args: Tuple[Any, ...]) -> None:
    conn = Connection()
    made = conn.templates.record(PATH, args, {}, 1, TYPED, proxy.reference)
    if made is not None:  # a plain proxy of a path is a template's constant
        express.learn(conn, PATH, args, {}, SITE, TYPED, "torch.Tensor", proxy)  # type: ignore[arg-type]
    assert not conn.templates.plans


def test_a_path_and_a_method_of_one_site_name_have_their_own_plans() -> None:
    x = (proxy.make({"$": "h", "id": 1}, "torch.Tensor", None),)
    as_path = express.key({"$": "p", "p": "torch.Tensor.add"}, x, {}, "torch.Tensor.add")
    method = {"$": "a", "o": {"$": "h", "id": 1}, "n": "add"}
    as_method = express.key(method, x, {}, "torch.Tensor.add")
    assert as_path != as_method


LOOP = """
import torch

x = torch.arange(6.0)
w = torch.ones(6)
total = torch.zeros(())
for i in range(60):
    y = (x * 0.5 + i) * w
    z = y.sum(0, keepdim=bool(i % 2))  # a bool constant that alternates
    total = total + torch.nn.functional.softmax(y, dim=0).max()
    if i == 30:
        try:
            w + torch.ones(5)  # the site streamed in every step so far
        except RuntimeError as exc:
            print("caught at its line:", type(exc).__name__)
print(z.shape, round(float(total), 4), y.tolist())
"""


def stats(path: Path) -> Dict[str, int]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    path.unlink()
    keys = ("calls", "express", "round_trips")
    return {key: sum(line.get(key, 0) for line in lines) for key in keys}


def test_a_waiting_plan_sends_its_record_until_its_site_streams() -> None:
    """A call that waits (data-plane version 3) goes by its plan too: the same waiting record,
    its answer returned; once its site streams (predicted, or found void) the full path
    decides, and a call that differs from the plan takes the full path as well."""
    conn = Connection()
    waited: List[Any] = []
    conn.request = lambda meta, record=None: waited.append(record) or "answer"  # type: ignore[attr-defined]
    x = tensor(conn, 5)
    conn.sent += conn.templates.record(PATH, (x, 2), {}, 1, TYPED, proxy.reference) or b""
    express.learn(conn, PATH, (x, 2), {}, SITE, TYPED, None, proxy, waits=True)  # type: ignore[arg-type]
    plan = conn.templates.plans[express.key(PATH, (x, 2), {}, SITE)]
    assert plan.waits and plan.predicted is None
    assert express.wait(conn, plan, PATH, (x, 3), {}, {}, set()) == "answer"  # type: ignore[arg-type]
    conn.sent += waited[0]
    assert [(r[1], r[3]) for r in sent_calls(conn)] == [(1, (5, 2)), (1, (5, 3))]
    for predictions, voids in (({TYPED: "torch.Tensor"}, set()), ({}, {TYPED})):
        miss = express.wait(conn, plan, PATH, (x, 3), {}, predictions, voids)  # type: ignore[arg-type]
        assert miss is express.MISS
    other = {"$": "p", "p": SITE + "_other"}
    assert express.wait(conn, plan, other, (x, 3), {}, {}, set()) is express.MISS  # type: ignore[arg-type]
    assert len(waited) == 1


def test_a_loop_goes_by_the_express_lane_with_the_local_result(harness: WorkerHarness) -> None:
    path = harness.root / "stats.jsonl"
    out = harness.same_as_local(LOOP, remote="torch", RADIUM_STATS_FILE=str(path))
    assert "caught at its line: RuntimeError" in out
    seen = stats(path)
    assert seen["express"] > 0.8 * seen["calls"], seen
    off = harness.program(
        harness.root / "app.py", "torch", RADIUM_EXPRESS="0", RADIUM_STATS_FILE=str(path)
    )
    assert off.returncode == 0, off.stderr
    assert off.stdout == out
    without = stats(path)
    assert without["express"] == 0 and without["round_trips"] == seen["round_trips"], (
        seen,
        without,
    )


# Remote code that reads the working directory, called by plan while the program changes it.
CHANGING_DIRECTORY = """
import os
import torch
from torch import nn

class Here(nn.Module):
    def forward(self, x):
        return x + len(os.getcwd())

here, x, seen = Here(), torch.zeros(1), []
for step in range(8):
    os.chdir("/usr" if step % 2 else "/")
    seen.append(here(x))
print([float(t) for t in seen])
"""


def test_remote_code_sees_each_working_directory_of_the_program(harness: WorkerHarness) -> None:
    path = harness.root / "stats.jsonl"
    out = harness.same_as_local(CHANGING_DIRECTORY, remote="torch", RADIUM_STATS_FILE=str(path))
    assert out.strip() == str([1.0, 4.0] * 4)


# A hand-written SGD step: the update in ``with torch.no_grad():``, as tutorials write it.
NO_GRAD_STEPS = """
import torch
w = torch.ones(3, requires_grad=True)
x = torch.arange(3.0)
for step in range(200):
    loss = (w * x).sum()
    loss.backward()
    with torch.no_grad():
        w -= 0.01 * w.grad
        w.grad = None
print(w.tolist())
"""


def test_a_with_in_every_step_goes_by_the_express_lane(harness: WorkerHarness) -> None:
    # The manager's construction, its __enter__ (its result dropped) and its exit are records
    # by plan as the body's calls are: no JSON frame, no round trip per step.
    path = harness.root / "stats.jsonl"
    harness.same_as_local(NO_GRAD_STEPS, remote="torch", RADIUM_STATS_FILE=str(path))
    seen = stats(path)
    assert seen["round_trips"] < 20, seen
    assert seen["express"] > 0.95 * seen["calls"], seen
