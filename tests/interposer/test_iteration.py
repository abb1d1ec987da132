"""Remote tuples iterated and remote lists unpacked in one round trip (the ``items`` operation,
docs/data-plane.md), and attributes that are always a tensor streamed (docs/remoting.md,
"Calls are streamed"): the local result, fewer round trips, and where neither may apply."""

from __future__ import annotations

import sys
from typing import Any, ClassVar, Dict, Iterator, List, Optional

import pytest

from radium_interposer import codec, iteration
from tests.interposer.harness import WorkerHarness
from tests.interposer.test_batches import counts

UNPACKING = """
import numpy as np

total = 0.0
for i in range(50):
    parts = np.array_split(np.arange(6.0) + i, 2)  # a remote list of two arrays
    low, high = parts  # unpacked: read whole
    first, *others = np.array_split(np.arange(9.0), 3)
    total += float(low.sum()) + float(high.sum())
print(total, len(others), others[1].tolist())
pair = np.divmod(np.arange(5), 2)  # a remote tuple
print([p.tolist() for p in pair], tuple(x.sum() for x in pair))
try:
    a, b, c = np.array_split(np.arange(4), 2)
except ValueError as error:
    print("ValueError:", error)
"""


def test_unpacking_a_remote_list_takes_one_round_trip_with_the_local_result(
    harness: WorkerHarness,
) -> None:
    stats = harness.root / "stats.jsonl"
    out = harness.same_as_local(UNPACKING, remote="numpy", RADIUM_STATS_FILE=str(stats))
    assert "not enough values to unpack (expected 3, got 2)" in out
    # Per step: array_split waits (its list comes back as a handle), the unpacking reads it in
    # one round trip (iter + 3 next before: 4), two float() wait. Before: 2 x 4 more.
    assert counts(stats)["round_trips"] < 50 * 6, counts(stats)


LOADER = """
import torch
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
data = TensorDataset(torch.randn(64, 3), torch.arange(64))
loader = DataLoader(data, batch_size=4)
total = 0.0
for X, y in loader:  # each batch's two items come with its next()
    total += float((X.sum() + y.sum()))
for i, (X, y) in enumerate(loader):  # enumerate's tuple is unpacked at once too
    total += i
for i, batch in enumerate(loader):  # kept, then changed: the unpacking asks again
    batch.append(batch[1] * 2)
    X, y, z = batch
print(round(total, 4), z.tolist())
"""


def test_a_loop_unpacking_what_next_gives_reads_it_with_the_next(
    harness: WorkerHarness,
) -> None:
    stats = harness.root / "stats.jsonl"
    out = harness.same_as_local(LOADER, remote="torch", RADIUM_STATS_FILE=str(stats))
    assert out.strip().endswith("[120, 122, 124, 126]")
    # The two first loops' 32 unpackings cost no round trip of their own: 149 in all before,
    # 117 now (the third loop's unpacking still asks, after the append).
    assert counts(stats)["round_trips"] < 149 - 24, counts(stats)


CHANGED_WHILE_ITERATED = """
import numpy as np

parts = np.array_split(np.arange(6), 3)  # a remote list
for part in parts:  # the body appends: the loop sees what it appended, as locally
    if len(parts) < 5:
        parts.append(part * 10)
    print(part.tolist())
print(len(parts))
"""


def test_a_for_loop_over_a_remote_list_sees_its_body_s_changes(harness: WorkerHarness) -> None:
    out = harness.same_as_local(CHANGED_WHILE_ITERATED, remote="numpy")
    assert out.splitlines()[-2:] == ["[20, 30]", "5"]


ATTRIBUTES = """
import torch

torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
x = torch.randn(8, 4)
print(model.weight.grad is None)
for step in range(60):
    loss = model(x).pow(2).sum()
    model.zero_grad()
    loss.backward()
    for p in model.parameters():
        p.data -= 0.01 * p.grad.data
    w, s = model.weight.T, x.shape
print(loss.item(), w.shape, s, x.dtype, x.device, model.weight.data.sum().item())
print(model.weight.grad is None, x.grad is None, x.T.shape[0])
"""


def test_attributes_that_are_always_a_tensor_stream(harness: WorkerHarness) -> None:
    stats = harness.root / "stats.jsonl"
    out = harness.same_as_local(ATTRIBUTES, remote="torch", RADIUM_STATS_FILE=str(stats))
    assert out.splitlines()[0] == "True" and out.splitlines()[-1].startswith("False True")
    # Per step, 5 wait: model.weight (a module's attribute may be anything), the parameters()
    # generator's iter and three next. p.data twice, p.grad.data (p.grad's value is read for an
    # attribute) and .T stream: 13.6 round trips a step before (816 in all), then 7.6.
    assert counts(stats)["round_trips"] < 60 * 6, counts(stats)


GRADIENTS = """
import torch

torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)
b = torch.randn((), requires_grad=True)
x = torch.randn(16, 3)
print(w.grad is None)  # None: it waits, and the answer is None
for step in range(40):
    loss = ((x @ w + b) ** 2).sum()
    loss.backward()
    with torch.no_grad():
        w -= 0.01 * w.grad  # an operand: streams
        w += w.grad * 0.001  # the left operand, the right one loaded after it: streams
        b -= -(b.grad) * -0.01  # a unary operand: streams
        w.grad.zero_()  # an attribute: streams
        kept = b.grad  # kept by the program, which may test it for None: waits
        b.grad = None
print(loss.item(), kept.item(), w.grad is None, b.grad is None, w.grad[0] * 0)
"""


def test_a_gradient_used_at_once_streams(harness: WorkerHarness) -> None:
    stats = harness.root / "stats.jsonl"
    out = harness.same_as_local(GRADIENTS, remote="torch", RADIUM_STATS_FILE=str(stats))
    assert out.splitlines()[0] == "True" and "False True" in out.splitlines()[-1]
    # Per step, only ``kept = b.grad`` waits (and the first read of each use): 3 more before.
    assert counts(stats)["round_trips"] < 40 * 2, counts(stats)


NONE_WHERE_STREAMED = """
import torch

w = torch.ones(2, requires_grad=True)
(w * 2).sum().backward()
print((0.5 * w.grad).tolist())  # a tensor: reads of .grad used at once stream from now on
v = torch.ones(2, requires_grad=True)  # never backward: v.grad is None
try:
    0.5 * v.grad  # in a try: waits, and the handler sees the error here
except TypeError as error:
    print("caught:", error)
step = 0.5 * v.grad  # streamed: the worker raises the error a local run raises here
print("not reached")  # the next point that waits: raised here, before the output
"""


def test_a_gradient_that_is_none_where_it_streamed_raises_the_local_error(
    harness: WorkerHarness,
) -> None:
    local, remoted = harness.fails_as_locally(NONE_WHERE_STREAMED)
    assert "caught: unsupported operand type(s) for *: 'float' and 'NoneType'" in local.stdout
    error = "TypeError: unsupported operand type(s) for *: 'float' and 'NoneType'"
    assert error in local.stderr.splitlines() and error in remoted.stderr.splitlines()
    # Raised at the next point that waits, naming the line of the streamed call (a local run
    # stops at that line).
    assert 'app.py", line 12' in local.stderr
    assert remoted.stderr.strip().splitlines()[-1].endswith("app.py:12, reported here")


PARAMETERS = """
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
x = torch.randn(5, 3)
for step in range(20):
    loss = model(x).pow(2).sum()
    model.zero_grad()
    loss.backward()
    for p in model.parameters():  # its items come with the iter: no next() each
        p.data.add_(p.grad, alpha=-0.01)  # given to p's own method: streams
print(loss.item())
for name, p in model.named_parameters():
    print(name, tuple(p.shape))
print([type(m).__name__ for m in model.children()])
"""
PARAMETERS_ELSE = """
import torch

model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
big = torch.nn.ModuleList([torch.nn.Linear(1, 1) for _ in range(150)])  # 300: read remotely
print(sum(1 for _ in big.parameters()), len(list(big.named_parameters())))
it = model.parameters()
first = next(it)  # next() on it, never iter(): as before
print(tuple(first.shape), len(list(it)), len(list(model.modules())))
"""


def test_a_loop_over_a_modules_parameters_takes_one_round_trip(harness: WorkerHarness) -> None:
    stats = harness.root / "stats.jsonl"
    harness.same_as_local(PARAMETERS, remote="torch", RADIUM_STATS_FILE=str(stats))
    # Per step: the loop's iter (and the first reads of each site); before, a next() and a
    # p.grad per parameter (9 a step): 180 more.
    assert counts(stats)["round_trips"] < 80, counts(stats)
    harness.same_as_local(PARAMETERS_ELSE, remote="torch")


NONE_TO_OWN_METHOD = """
import torch

w = torch.nn.Parameter(torch.ones(2))
unused = torch.nn.Parameter(torch.ones(2))  # never in the loss: its grad stays None
for p in (w, w, unused):
    (w * 2).sum().backward()
    p.data.add_(p.grad, alpha=-0.1)  # streamed from the second: the worker raises for unused
print("not reached")
"""


def test_none_given_to_a_method_where_it_streamed_raises_the_local_error(
    harness: WorkerHarness,
) -> None:
    local, remoted = harness.fails_as_locally(NONE_TO_OWN_METHOD)
    assert local.stdout == ""
    assert local.stderr.strip().splitlines()[-1].startswith("TypeError: add_(): argument 'other'")
    assert remoted.stderr.strip().splitlines()[-1].endswith("app.py:8, reported here")


CLASS_METHODS = """
import torch


class Square(torch.autograd.Function):
    scale = 2.0  # a plain class attribute: read as itself

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * Square.scale * x


w = torch.full((3,), 0.5, requires_grad=True)
for step in range(30):
    f = Square.apply  # a callable of the class: a method reference, no round trip
    loss = f(w).sum()
    loss.backward()
    with torch.no_grad():
        w -= 0.1 * w.grad
        w.grad = None
print(w.tolist(), Square.scale, type(Square.scale).__name__)
print(torch.Tensor.add(w, 1).tolist(), torch.Tensor.is_leaf.__class__.__name__)
"""


def test_a_class_s_callables_are_method_references(harness: WorkerHarness) -> None:
    stats = harness.root / "stats.jsonl"
    out = harness.same_as_local(CLASS_METHODS, remote="torch", RADIUM_STATS_FILE=str(stats))
    assert "2.0 float" in out and out.strip().endswith("getset_descriptor")
    # Square.apply waited once a step before (30 round trips); now no step waits.
    assert counts(stats)["round_trips"] < 30, counts(stats)


class _Iterated:
    """Asks ``whole`` while it is iterated, of its caller, as the proxy's ``__iter__`` does."""

    seen: ClassVar[List[Dict[str, bool]]] = []

    def __iter__(self) -> Iterator[int]:
        frame = sys._getframe(1)  # while it runs: the frame goes on after this returns
        kinds = ("builtins.list", "builtins.tuple", "builtins.dict")
        self.seen.append({kind: iteration.whole(kind, frame) for kind in kinds})
        return iter((1, 2))


def test_only_a_tuple_or_an_unpacked_list_is_read_whole() -> None:
    _Iterated.seen = []
    _x, _y = _Iterated()
    _first, *_rest = _Iterated()
    for _ in _Iterated():
        pass
    list(_Iterated())
    unpacked, starred, looped, listed = _Iterated.seen
    assert unpacked == starred == {"builtins.list": True, "builtins.tuple": True,
                                   "builtins.dict": False}  # fmt: skip
    assert looped == listed == {"builtins.list": False, "builtins.tuple": True,
                                "builtins.dict": False}  # fmt: skip
    assert not iteration.whole("builtins.list", None)


def _answering(answer: Optional[Dict[str, Any]], error: Optional[Exception] = None) -> Any:
    asked: List[str] = []

    def request(op: str, **fields: Any) -> Dict[str, Any]:
        asked.append(op)
        if error is not None:
            raise error
        assert answer is not None
        return answer

    request.asked = asked  # type: ignore[attr-defined]
    return request


def test_the_items_answer_is_checked_before_it_is_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(iteration, "_supported", True)
    decoded: List[Any] = []

    def decode(tree: Any, buffers: List[Any]) -> Any:
        decoded.append(tree)
        return list(tree)

    ref = {"$": "h", "id": 1}
    assert iteration.items(ref, _answering({"v": None, "buffers": []}), decode) is None
    whole = iteration.items(ref, _answering({"v": [1, 2], "buffers": []}), decode)
    assert whole is not None and list(whole) == [1, 2]
    too_many = {"v": [0] * (iteration.MAX_ITEMS + 1), "buffers": []}
    with pytest.raises(codec.DecodeError):
        iteration.items(ref, _answering(too_many), decode)
    with pytest.raises(codec.DecodeError):
        iteration.items(ref, _answering({"v": {"$": "h"}, "buffers": []}), decode)
    assert decoded == [[1, 2]]  # neither bad answer was decoded


def test_a_worker_without_items_is_asked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(iteration, "_supported", True)
    older = _answering(None, ValueError("ValueError: unknown operation 'items'"))
    assert iteration.items({"$": "h", "id": 1}, older, lambda t, b: t) is None
    assert iteration.items({"$": "h", "id": 1}, older, lambda t, b: t) is None
    assert older.asked == ["items"]
    other = _answering(None, ValueError("poisoned: a streamed call raised"))
    monkeypatch.setattr(iteration, "_supported", True)
    with pytest.raises(ValueError, match="poisoned"):  # any other error is the program's
        iteration.items({"$": "h", "id": 1}, other, lambda t, b: t)
