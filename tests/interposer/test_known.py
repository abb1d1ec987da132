"""Metadata read once (docs/remoting.md, "Metadata read once"): shapes, dtypes, lengths and
what a ``torch.Size`` holds answered here after the first read, and forgotten at every call
that could change them, with the local result either way."""

from __future__ import annotations

from typing import Any, Dict, Optional

import pytest

from radium_interposer import known
from tests.interposer.harness import WorkerHarness
from tests.interposer.test_batches import counts

READ_OFTEN = """
import torch

x = torch.ones(4, 3)
y = x * 2
for i in range(100):
    s = x.shape
    n = s[0] + len(x) + x.ndim + y.shape[1] + len(y.shape) + x.size(1)
    d = str(x.dtype) + format(x.device) + str(x.requires_grad) + repr(s)
    dims = [k for k in x.shape]
    first, second = y.shape
    z = x + y  # makes a new tensor: nothing kept changes
print(n, d, dims, s, x.dtype, x.device, first, second)
"""


def test_metadata_read_often_costs_one_round_trip(harness: WorkerHarness) -> None:
    stats = harness.root / "stats.jsonl"
    out = harness.same_as_local(READ_OFTEN, remote="torch", RADIUM_STATS_FILE=str(stats))
    assert out.startswith("18 torch.float32cpuFalsetorch.Size([4, 3]) [4, 3]")
    # Each read waits once (about 15 of them). Before, every read of every step waited: 1300
    # round trips.
    assert counts(stats)["round_trips"] < 40, counts(stats)


CHANGED = """
import torch

def show(label, t):
    print(label, t.shape, len(t), t.ndim, t.dtype, t.requires_grad, t.is_leaf, t.size(0), t.dim())

x = torch.zeros(2, 3)
show("start", x)
x.resize_(3, 4)  # in place, with the suffix
show("resize_", x)
x.unsqueeze_(0)
show("unsqueeze_", x)
x.data = torch.ones(5, dtype=torch.float64)  # an assignment
show("data =", x)
w = torch.ones(1, requires_grad=True)
x[0] = w[0] * 2  # an element that requires grad: x comes to require grad
show("setitem", x)
c = torch.zeros(1)
show("c", c)
torch.add(torch.ones(2, 2), 1, out=c)  # out= resizes
show("out=", c)
leaf = torch.zeros(3)
show("leaf", leaf)
leaf.requires_grad = True
show("requires_grad =", leaf)
m = torch.nn.Linear(2, 2)
p = m.weight
show("weight", p)
m.double()  # a module's method: the parameters' dtype changes
show("double()", p)
"""


def test_every_call_that_may_change_metadata_forgets_it(harness: WorkerHarness) -> None:
    out = harness.same_as_local(CHANGED, remote="torch")
    assert "double() torch.Size([2, 2]) 2 2 torch.float64 True True 2 2" in out


NUMPY_CHANGED = """
import numpy as np

a = np.zeros((2, 3))
print(a.shape, a.ndim, a.size, len(a), a.dtype, str(a.dtype), a.T.shape)
a.resize((3, 4), refcheck=False)
print(a.shape, a.size, len(a))
a.shape = (4, 3)
print(a.shape, len(a))
a.dtype = np.int64  # same item size: a view of the same bytes
print(a.dtype, a.shape)
b = a.reshape(2, 6)
print(b.shape, a.shape, b.dtype.itemsize)
"""


def test_numpy_metadata_is_forgotten_at_each_change(harness: WorkerHarness) -> None:
    harness.same_as_local(NUMPY_CHANGED, remote="numpy")


def _kind(value: Any) -> Optional[str]:
    return value.kind if isinstance(value, _Remote) else None


class _Remote:
    def __init__(self, kind: str) -> None:
        self.kind = kind


TENSOR = _Remote("torch.Tensor")


def _method(name: str) -> Dict[str, Any]:
    return {"$": "a", "o": {"$": "h", "id": 1}, "n": name}


def _path(path: str) -> Dict[str, Any]:
    return {"$": "p", "p": path}


@pytest.mark.parametrize(
    ("function", "site", "args", "kwargs"),
    [
        (_path("operator.add"), "torch.Tensor|add|0", (TENSOR, 1), {}),
        (_path("operator.getitem"), "torch.Size|getitem|0", (_Remote("torch.Size"), 0), {}),
        (_method("sum"), "torch.Tensor.sum", (1,), {"keepdim": True}),
        (_path("torch.cat"), "torch.cat", ([TENSOR, TENSOR],), {"dim": 0}),
        (_path("torch.add"), "torch.add", (TENSOR, TENSOR), {}),
        (_path("numpy.add"), "numpy.add", (TENSOR, 2.0), {}),
        (_path("builtins.getattr"), "torch.Tensor|builtins.getattr", (TENSOR, "shape"), {}),
        (_method("to"), "torch.Tensor.to", (_Remote(known.LIBRARY),), {}),
        # ``x[range(n), target]``: a range is plain data
        (_path("operator.getitem"), "torch.Tensor|getitem|0", (TENSOR, (range(3), TENSOR)), {}),
    ],
)
def test_calls_that_make_new_objects_keep_metadata(
    function: Dict[str, Any], site: str, args: Any, kwargs: Dict[str, Any]
) -> None:
    assert known.harmless(function, site, args, kwargs, _kind)


@pytest.mark.parametrize(
    ("function", "site", "args", "kwargs"),
    [
        (_method("add_"), "torch.Tensor.add_", (1,), {}),  # in place
        (_method("resize"), "numpy.ndarray.resize", ((3, 4),), {}),
        (_method("backward"), "torch.Tensor.backward", (), {}),  # hooks: the program's code
        (_method("double"), "torch.nn.modules.linear.Linear.double", (), {}),
        (_path("operator.iadd"), "torch.Tensor|iadd|0", (TENSOR, TENSOR), {}),
        (_path("operator.setitem"), "torch.Tensor|setitem", (TENSOR, 0, TENSOR), {}),
        (_path("builtins.setattr"), "torch.Tensor|builtins.setattr", (TENSOR, "data", 1), {}),
        (_path("torch.add"), "torch.add", (TENSOR, 1), {"out": TENSOR}),
        (
            _path("torch.nn.functional.relu"),
            "torch.nn.functional.relu",
            (TENSOR,),
            {"inplace": True},
        ),
        (_path("torch.nn.init.normal_"), "torch.nn.init.normal_", (TENSOR,), {}),
        (_path("torch.autograd.grad"), "torch.autograd.grad", (TENSOR, TENSOR), {}),
        (_path("numpy.apply_along_axis"), "numpy.apply_along_axis", (print, 0, TENSOR), {}),
        (_path("torch.cat"), "torch.cat", ([TENSOR, _Remote("app.Model")],), {}),
        (_path("radium_shipped.app.step"), "radium_shipped.app.step", (TENSOR,), {}),
        ({"$": "h", "id": 7}, "torch.nn.modules.linear.Linear", (TENSOR,), {}),  # a model
    ],
)
def test_calls_that_may_change_metadata_forget_it(
    function: Dict[str, Any], site: str, args: Any, kwargs: Dict[str, Any]
) -> None:
    assert not known.harmless(function, site, args, kwargs, _kind)


def test_answers_are_kept_until_forgotten_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(known, "answers", {})
    asked = []

    def ask() -> int:
        asked.append(1)
        return 3

    assert known.attribute(1, "ndim", ask, lambda v: True) == 3
    assert known.attribute(1, "ndim", ask, lambda v: True) == 3
    assert len(asked) == 1
    known.forget()
    known.attribute(1, "ndim", ask, lambda v: True)
    assert len(asked) == 2
    known.attribute(2, "grad", ask, lambda v: False)  # not keepable: asked each time
    known.attribute(2, "grad", ask, lambda v: False)
    assert len(asked) == 4
    monkeypatch.setattr(known, "LIMIT", 2)
    for handle in range(10, 15):
        known.attribute(handle, "ndim", ask, lambda v: True)
    assert len(known.answers) <= 2
