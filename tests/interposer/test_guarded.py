"""A call made inside a ``try`` body is not pipelined, so its error is raised inside the body
and the program's handler sees it, as locally (docs/remoting.md, "Chains are pipelined")."""

from __future__ import annotations

import contextlib
import sys
from typing import Any, ClassVar

from radium_interposer import guarded, instructions
from tests.interposer.harness import WorkerHarness
from tests.interposer.test_batches import counts


def here() -> bool:
    """Whether the caller is where a remote call would wait (its frame, as invoke finds it)."""
    return guarded.in_try(guarded.program_frame().f_back)  # type: ignore[union-attr]


def test_which_calls_are_inside_a_try_body() -> None:
    def where() -> list[bool]:
        seen = [here()]
        try:
            seen.append(here())
            raise ValueError
        except ValueError:
            seen.append(here())  # the handler itself: not guarded any more
        with contextlib.nullcontext():
            seen.append(here())  # a local with: its exit must see the errors
        with open("/dev/null"):
            seen.append(here())  # a file's: its exit sees nothing (files_opened)
        try:
            with contextlib.nullcontext():
                seen.append(here())  # a with body inside a try body
            try:
                raise KeyError
            except KeyError:
                seen.append(here())  # a handler inside a try body
        finally:
            seen.append(here())
        seen.extend(here() for _ in range(1))
        return seen

    assert where() == [False, True, False, True, False, True, True, False, False]


def test_a_with_of_an_open_of_the_programs_own_is_a_local_with() -> None:
    source = (
        "seen = []\n"
        "with open('/dev/null'):\n"
        "    seen.append(here())\n"
        "open = lambda path: contextlib.nullcontext()  # the program's own\n"
        "with open('/dev/null'):\n"
        "    seen.append(here())\n"
    )
    namespace = {"here": lambda: guarded.in_try(sys._getframe(1)), "contextlib": contextlib}
    exec(compile(source, "app.py", "exec"), namespace)
    assert namespace["seen"] == [False, True]


_RATE = 0.5


class _Reads:
    """Records what its reader does with ``grad``, as the proxy's read asks it."""

    seen: ClassVar[list[str | None]] = []

    def __getattr__(self, name: str) -> int:
        _Reads.seen.append(instructions.attribute_use(sys._getframe(1), name))
        return 1

    def add_(self, *args: Any, **kwargs: Any) -> None:
        pass


def test_what_the_program_does_with_an_attribute_it_reads() -> None:
    _Reads.seen = []
    x, k = _Reads(), 2
    _ = 0.5 * x.grad
    _ = -x.grad
    _ = x.grad.real
    _ = x.grad.bit_length()
    is_none = x.grad is None
    kept = x.grad
    _ = getattr(x, "grad")  # noqa: B009 - read by a call, not by the frame's instruction
    assert (is_none, kept) == (False, 1)
    assert _Reads.seen[:2] == ["BINARY_OP", "UNARY_NEGATIVE"]
    assert _Reads.seen[2] == "LOAD_ATTR" and _Reads.seen[3] in ("LOAD_ATTR", "LOAD_METHOD")
    assert _Reads.seen[4:] == ["?", "STORE_FAST", None]
    # The left operand: past the loads of the right one, the instruction that takes both.
    _Reads.seen = []
    _ = x.grad * k
    _ = x.grad * 0.5 + k
    _ = x.grad - k.real
    _ = k * x.grad * k
    assert _Reads.seen == ["BINARY_OP"] * 4
    # Given to a call, or with a call between it and its use: not followed.
    _Reads.seen = []
    _ = abs(x.grad)
    _ = divmod(x.grad, k)
    _ = x.grad * abs(k)
    _ = x.grad * k.bit_length()
    assert _Reads.seen[0] in ("PRECALL", "CALL") and _Reads.seen[1:] == ["?", "?", "?"]
    # Given to a method reached from its own variable (a remote call, the variable being a
    # proxy), plain loads around it; another variable's method is any call's.
    _Reads.seen = []
    y = _Reads()
    x.add_(x.grad, alpha=-k)
    x.add_(_RATE, x.grad, alpha=-_RATE)  # globals too
    y.add_(x.grad)
    x.add_(x.grad, abs(k))
    assert _Reads.seen[:2] == [instructions.OWN_METHOD] * 2
    assert _Reads.seen[2] in ("PRECALL", "CALL") and _Reads.seen[3] == "?"


def test_an_error_in_a_try_body_is_caught_by_its_handler_as_locally(
    harness: WorkerHarness,
) -> None:
    out = harness.same_as_local(
        """
        import warnings

        import numpy as np

        def invert(m):
            try:
                return np.linalg.inv(m)
            except np.linalg.LinAlgError as e:
                print("caught:", e)
                return None

        for m in ([[1.0, 2.0], [3.0, 4.0]], [[0.0, 0.0], [0.0, 0.0]]) * 2:
            print(invert(np.array(m)))
        with np.errstate(divide="ignore"):
            print(np.array([1.0]) / 0)
        with np.errstate(divide="raise"):
            try:
                np.array([1.0]) / 0
                print("not raised")
            except FloatingPointError as e:
                print("FloatingPointError:", e)
        x = np.arange(6.0)
        for degree in (2, 2, 30):  # the third call warns, at a site pipelined by then
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                fitted = np.polyfit(x, x * x, degree)
            print(degree, [w.category.__name__ for w in caught])
        """,
        "numpy",
    )
    assert out.count("caught: Singular matrix") == 2
    assert "FloatingPointError: divide by zero encountered in divide" in out
    assert "30 ['RankWarning']" in out


FILE_WITH = """
import numpy as np

with open("data.txt", "w") as f:
    f.write("1 2 3\\n" * 60)
total = np.zeros(3)
with open("data.txt") as f:  # a file's exit sees nothing: calls in its body stream
    for line in f:
        total = total + np.array([float(v) for v in line.split()])
print(total.tolist())
with open("data.txt") as f:
    rows = [np.array(line.split(), dtype=float) for line in f]
    bad = rows[0] + np.ones(4)  # streamed: raised at the next point that waits
print("not reached")
"""


def test_calls_in_the_body_of_a_with_of_a_file_stream(harness: WorkerHarness) -> None:
    stats = harness.root / "stats.jsonl"
    local, remoted = harness.fails_as_locally(FILE_WITH, "numpy", RADIUM_STATS_FILE=str(stats))
    assert local.stdout == "[60.0, 120.0, 180.0]\n"
    error = local.stderr.strip().splitlines()[-1]
    assert error.startswith("ValueError: operands could not be broadcast"), local.stderr
    assert remoted.stderr.strip().splitlines()[-1].endswith("app.py:13, reported here")
    # Each line's two calls waited before (120 round trips): now the first of each site.
    assert counts(stats)["round_trips"] < 30, counts(stats)


def test_code_without_handlers_is_not_listed(monkeypatch: Any) -> None:
    """Code without an exception table has no ``try`` and no ``with``: nothing is inside one,
    known without listing its instructions (a module's listing costs a millisecond)."""

    def plain() -> bool:
        return here()

    def guarded_code() -> bool:
        try:
            return here()
        except ValueError:
            return False

    listed = []
    real = guarded.dis.Bytecode
    monkeypatch.setattr(guarded.dis, "Bytecode", lambda code: listed.append(code) or real(code))
    assert plain() is False and guarded_code() is True
    assert listed == [guarded_code.__code__]
