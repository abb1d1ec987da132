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
    # Per step, 7 wait: model.weight (a module's attribute may be anything), two p.grad (they
    # may be None), the parameters() generator's iter and three next. p.data twice,
    # p.grad.data and .T stream: 13.6 round trips a step before (816 in all).
    assert counts(stats)["round_trips"] < 60 * 8, counts(stats)


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
