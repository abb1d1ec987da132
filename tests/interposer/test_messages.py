"""What a remoted program is told, as locally (docs/remoting.md, "Errors, context managers and
warnings"): remote errors with their own message and args, a remote context manager that sees
the ``with`` body's exception, and the worker's warnings in the program's ``warnings``
machinery. Each program runs from a Python without numpy/torch and is compared with its run
here with the framework and no remoting at all."""

from __future__ import annotations

import re
import subprocess
import sys
import warnings
from typing import Any

import pytest

from tests.interposer.harness import WorkerHarness

ERRORS = """
import numpy as np

try:
    np.linalg.inv(np.zeros((2, 2)))
except np.linalg.LinAlgError as e:
    print(type(e).__name__, repr(str(e)), e.args, isinstance(e, ValueError))
try:
    np.sum(np.ones(3), axis=4)
except np.exceptions.AxisError as e:
    print(type(e).__name__, repr(str(e)), e.args, isinstance(e, ValueError))
try:
    np.ones(3).reshape(2, 2)
except ValueError as e:
    print(type(e).__name__, repr(str(e)), e.args)
try:
    {}["missing"]
except KeyError as e:
    print(repr(str(e)))
"""


def test_remote_errors_have_the_local_message_and_args(harness: WorkerHarness) -> None:
    out = harness.same_as_local(ERRORS, remote="numpy")
    assert "LinAlgError 'Singular matrix' ('Singular matrix',) True" in out


def test_an_uncaught_remote_error_prints_where_it_happened_remotely(
    harness: WorkerHarness,
) -> None:
    done = harness.script("import numpy as np\nnp.linalg.inv(np.zeros((2, 2)))\n", "numpy")
    assert done.returncode == 1
    local, _, remote = done.stderr.partition("\nRemote traceback:\n")
    # The program's line, then the error's own one-line message, then the worker's frames.
    assert 'app.py", line 2, in <module>' in local
    assert local.rstrip().endswith("numpy.linalg.LinAlgError: Singular matrix"), done.stderr
    assert re.search(r'File ".*numpy/linalg/.*", line \d+, in inv', remote), done.stderr


CONTEXT_MANAGERS = """
import contextlib
import numpy as np


class Mine(Exception):
    pass


def bad():
    np.ones(3).reshape(2, 2)


with np.testing.assert_raises(ValueError):
    bad()
print("assert_raises: suppressed")
try:
    with np.testing.assert_raises(ValueError):
        pass
except AssertionError as e:
    print("assert_raises:", e)
try:
    with np.testing.assert_raises(TypeError):
        bad()
except ValueError as e:
    print("not its type:", type(e).__name__, e)
with np.testing.assert_raises(np.linalg.LinAlgError):
    np.linalg.inv(np.zeros((2, 2)))
print("remote class: suppressed")
with np.errstate(divide="ignore"):
    print(np.ones(2) / 0)
try:
    with np.errstate(divide="raise"):
        (np.ones(2) / 0).tolist()
except FloatingPointError as e:
    print("errstate:", e)
with np.testing.assert_raises(Mine):
    raise Mine("mine", 2)
print("own class: suppressed")
mine = Mine("mine", 2)
try:
    with np.testing.assert_raises(KeyError):
        raise mine
except Mine as e:
    print("the same object:", e is mine, e.args)
a = np.ones(6)
b = a.reshape(2, 3)  # its call site now pipelines: the next call's error would come later
with np.testing.assert_raises(ValueError):
    a.reshape(4, 4)  # its result is never used: the manager still sees the error
print("pipelined: suppressed")
try:
    with np.errstate(all="ignore"):
        a.reshape(5, 5)
except ValueError as e:
    print("pipelined, raised:", e)
with np.testing.assert_no_warnings():  # a generator's manager: the body's error thrown in it
    try:
        with np.testing.assert_no_warnings():
            raise mine
    except Mine as e:
        print("thrown and back:", e is mine)
"""


def test_a_remote_context_manager_sees_the_body_s_exception(harness: WorkerHarness) -> None:
    out = harness.same_as_local(CONTEXT_MANAGERS, remote="numpy")
    assert "assert_raises: suppressed" in out and "own class: suppressed" in out
    assert "pipelined: suppressed" in out and "pipelined, raised: cannot reshape" in out


# A manager of the program's own on a remote base (so it lives and runs on the worker) that
# records what it was given and suppresses only its kind; and torch's own.
RECORDING = """
import torch


class Recorder(torch.nn.Module):
    def __init__(self, suppress):
        super().__init__()
        self.suppress = suppress
        self.seen = []

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        # (The traceback stays with the program: the manager is given None, see the docs.)
        self.seen.append((kind and kind.__name__, value and value.args))
        return kind is not None and issubclass(kind, self.suppress)


recorder = Recorder(KeyError)
with recorder:
    pass
with recorder:
    raise KeyError("k")
try:
    with recorder:
        raise ValueError("v", 1)
except ValueError as e:
    print("propagated:", e.args)
print(recorder.seen)
with torch.no_grad():
    print(torch.is_grad_enabled())
try:
    with torch.no_grad():
        raise ValueError("inside")
except ValueError as e:
    print("propagated:", e, torch.is_grad_enabled())
"""


def test_a_remote_manager_records_the_exception_and_suppresses_its_kind(
    harness: WorkerHarness,
) -> None:
    out = harness.same_as_local(RECORDING, remote="torch")
    assert out.splitlines()[:3] == [
        "propagated: ('v', 1)",
        "[(None, None), ('KeyError', ('k',)), ('ValueError', ('v', 1))]",
        "False",
    ]


WARNINGS = """
import warnings
import numpy as np

x = np.arange(5.0)
y = x ** 2
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    np.polyfit(x, y, 8)
print([(w.category.__name__, str(w.message), w.lineno) for w in caught])
print(issubclass(caught[0].category, np.exceptions.RankWarning))
with warnings.catch_warnings():
    warnings.simplefilter("error")
    try:
        np.polyfit(x, y, 8)
    except np.exceptions.RankWarning as e:
        print("raised:", type(e).__name__, e)
    try:
        np.mean(np.array([]))
    except RuntimeWarning as e:
        print("raised:", type(e).__name__, e)
# Shown as numpy's own import-time filter says (always), at the line of each call, pipelined
# or not; RuntimeWarnings once per location (the default filter), at numpy's own lines.
a = np.ones(3)
for deg in (1, 8, 8, 2, 8):
    b = a + 1
    np.polyfit(x, y, deg)
    print(deg, np.mean(np.array([])))
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    np.polyfit(x, y, 8)
print(float(b.sum()))
"""


def test_remote_warnings_reach_the_program_s_warnings_machinery(harness: WorkerHarness) -> None:
    path = harness.root / "app.py"
    path.write_text(WARNINGS)
    out = harness.same_as_local("", remote="numpy", path=path)
    assert "[('RankWarning', 'Polyfit may be poorly conditioned', 9)]" in out
    assert "raised: RankWarning Polyfit may be poorly conditioned" in out
    assert "raised: RuntimeWarning Mean of empty slice" in out
    # What the default warning printer wrote: the same lines, locations and source text.
    remoted = harness.program(path, "numpy")
    local = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, cwd=harness.root
    )
    assert remoted.stderr == local.stderr
    assert remoted.stderr.count("app.py:27: RankWarning: Polyfit may be poorly") == 3


TORCH_WARNING = """
import warnings
import torch


class MyWarning(UserWarning):
    pass


class Net(torch.nn.Module):
    def forward(self, x):
        warnings.warn("from forward", MyWarning)
        return x * 2


with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    t = torch.tensor(torch.ones(2))
    Net()(torch.ones(2))
print([(w.category.__name__, str(w.message)[:40], w.lineno) for w in caught])
print(caught[1].category is MyWarning)
for _ in range(3):
    Net()(torch.ones(2))  # the default filter: once, at forward's line
"""


def test_torch_and_shipped_code_s_warnings_reach_the_program(harness: WorkerHarness) -> None:
    path = harness.root / "app.py"
    path.write_text(TORCH_WARNING)
    out = harness.same_as_local("", remote="torch", path=path)
    assert "('UserWarning', 'To copy construct from a tensor, it is r', 18)" in out
    assert "('MyWarning', 'from forward', 12)" in out and "True" in out
    remoted = harness.program(path, "torch")
    local = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, cwd=harness.root
    )
    assert remoted.stderr == local.stderr
    assert remoted.stderr.count("MyWarning: from forward") == 1


PYTEST_WARNS = """
import warnings

import numpy as np
import pytest

x = np.arange(5.0)


def test_warns():
    with pytest.warns(np.exceptions.RankWarning, match="poorly conditioned"):
        np.polyfit(x, x**2, 8)


def test_error_filter():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(np.exceptions.RankWarning):
            np.polyfit(x, x**2, 8)


def test_caught_by_pytest():
    np.polyfit(x, x**2, 8)


def test_numpy_is_remote():
    assert np.__radium_remote__
"""


def test_pytest_sees_remote_warnings(harness: WorkerHarness) -> None:
    """pytest (here from a Python that has numpy, not imported before the interposer: remoted)
    matches, raises and reports the worker's warnings as it does local ones."""
    (harness.root / "test_warns.py").write_text(PYTEST_WARNS)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_warns.py"]
    remoted = subprocess.run(
        command, env=harness.env("numpy"), capture_output=True, text=True, cwd=harness.root
    )
    assert "4 passed, 1 warning" in remoted.stdout, remoted.stdout + remoted.stderr
    assert "RankWarning: Polyfit may be poorly conditioned" in remoted.stdout


# -- in this process: what the client does with a hostile worker's word ----------------------


def test_the_client_refuses_an_exception_value_from_the_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only the client sends ``ex`` nodes; one from the worker makes no exception here."""
    from radium_interposer import codec, exits, proxy

    node = {"$": "ex", "t": {"$": "cls", "p": "builtins.ValueError", "e": "ValueError"}, "a": []}
    with pytest.raises(codec.DecodeError, match="unknown value tag 'ex'"):
        proxy.decode(node, [])
    # The worker's side makes it: its class from the path, from its args (the check can fail).
    # (worker_main binds the hook; a client, even with it bound, refuses the node above.)
    monkeypatch.setattr(codec, "rebuild_exception", exits.rebuild)
    with pytest.raises(codec.DecodeError, match="unknown value tag 'ex'"):
        proxy.decode(node, [])
    made = codec.decode({**node, "a": ["x", 1]}, [], _worker_resolve, codec.importing)
    assert type(made) is ValueError and made.args == ("x", 1)


def _worker_resolve(node: Any) -> Any:
    from radium_interposer.naming import resolve_path

    return resolve_path(str(node["p"]))


def test_hostile_warnings_are_bounded_and_only_warnings(capsys: pytest.CaptureFixture[str]) -> None:
    from radium_interposer import client_warnings

    entries: list[Any] = [
        {"c": "builtins.int", "e": "int", "m": "not a warning class", "f": "/x.py", "l": 1},
        {"c": "os.system", "e": "UserWarning", "m": "no code runs", "f": "/y.py", "l": 2},
        {"c": "../evil", "e": "UserWarning", "m": "y" * (1 << 20), "f": None, "l": -5},
        {
            "c": "builtins.UserWarning",
            "e": "UserWarning",
            "m": "many",
            "f": "/z.py",
            "l": 3,
            "n": 10**9,
        },
        *[{"c": "builtins.UserWarning", "m": str(i), "f": "/w.py", "l": i} for i in range(300)],
        "garbage",
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        client_warnings.forward({"w": entries, "err": "text"})
    kinds = {w.category for w in caught}
    assert kinds == {UserWarning}  # int is no warning; os.system is not a class
    assert max(len(str(w.message)) for w in caught) == client_warnings.MAX_TEXT
    assert sum(str(w.message) == "many" for w in caught) == client_warnings.MAX_REPEATS
    assert len(caught) == 3 + client_warnings.MAX_REPEATS + client_warnings.MAX_ENTRIES - 4
    assert "more warnings of a remote call were not replayed" in capsys.readouterr().err


def test_before_python_3_11_the_remote_traceback_is_the_cause() -> None:
    from radium_interposer import errors

    error = ValueError("message")
    error.add_note = None  # type: ignore[method-assign,assignment] # as on Python 3.7-3.10
    errors.with_remote_traceback(error, "Traceback ...: where")
    assert str(error) == "message" and error.args == ("message",)
    assert isinstance(error.__cause__, errors.RemoteTraceback)
    assert "where" in str(error.__cause__)


def test_the_pipelined_calls_kept_for_their_warnings_are_bounded_oldest_first() -> None:
    # The ring of recent pipelined calls keeps the newest MAX_PIPELINED: each new call takes
    # the place of the one MAX_PIPELINED before it (one store, nothing walked).
    from radium_interposer import client_warnings as warns

    frame = sys._getframe()
    base = 7 << 32  # a process's ids: a random base, then consecutive
    made = warns.MAX_PIPELINED + 100
    for n in range(made):
        warns.pipelined(base + n, f"site{n}", frame)
    kept = [n for n in range(made) if warns._noted(base + n) is not None]
    assert kept == list(range(100, made))
    assert warns._noted(base + made - 1)[0] == f"site{made - 1}"  # type: ignore[index]
    assert warns._noted("not an id") is None and warns._noted(base + made) is None
