"""The program's own code on the worker (docs/remoting.md, "Your modules" and "Nested
classes"): its sibling modules and packages, shipped whole and imported there by their own
names; classes and functions nested in its classes, under their qualified names. Each program's
output must equal its local run's."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.interposer.harness import WorkerHarness

MAIN = """
import os

import data, model, settings
import nspkg.tools  # a folder without __init__.py: only its submodule is imported by name
import pkg.util
from data import load

config = {"scale": 3}  # a global named like the program's config.py, which is never imported


def evaluate(rows):
    data = [r * 2 for r in rows]  # a local named like the module
    return sum(data)


def train():
    rows = data.load(4)
    net = model.Net(rows)
    direct = load(2)  # the module's own function: the same module state as data.load
    return (net.total(), pkg.util.double(5), pkg.VERSION, direct, data.count(),
            config["scale"], model.describe(), evaluate(rows), os.path.basename(data.__file__),
            nspkg.tools.answer(), settings.lr)


if __name__ == "__main__":
    print("main starts")
    settings.lr = 0.25  # the program's value, not the file's, when train runs
    print(train())
    settings.lr = 0.5  # changed after train was shipped: its next call sees it
    again = train()
    print(again[4], again[-1])  # data's own state, which the program left alone, went on
"""

SIBLINGS = {
    "data.py": """
        import helpers  # a sibling importing a sibling

        print("data imported")  # once: its top level ran here
        _calls = []


        def load(n):
            _calls.append(n)
            return [helpers.square(i) for i in range(n)]


        def count():
            return len(_calls)
        """,
    "helpers.py": """
        def square(x):
            return x * x
        """,
    "model.py": """
        from helpers import square


        class Net:
            def __init__(self, rows):
                self.rows = rows

            def total(self):
                return sum(self.rows) + square(3)


        def describe():
            return f"{Net.__module__}.{Net.__qualname__}"
        """,
    "settings.py": "lr = 0.1\n",
    "config.py": 'raise RuntimeError("config.py is not the global named config")\n',
    "pkg/__init__.py": 'from . import util\n\nVERSION = "1.0"\n',
    "pkg/util.py": """
        from .base import FACTOR


        def double(x):
            return x * FACTOR
        """,
    "pkg/base.py": "FACTOR = 2\n",
    "nspkg/tools.py": "from . import more\n\n\ndef answer():\n    return more.G + 1\n",
    "nspkg/more.py": "G = 41\n",
}


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def test_a_split_function_uses_the_program_s_sibling_modules_and_packages(
    harness: WorkerHarness,
) -> None:
    _write(harness.root, {**SIBLINGS, "main.py": MAIN})
    split = harness.root / "split.toml"
    split.write_text('functions = ["main:train"]\n')
    out = harness.same_as_local("", "", path=harness.root / "main.py", RADIUM_SPLIT=str(split))
    assert out.splitlines() == [
        "data imported",
        "main starts",
        "(23, 10, '1.0', [0, 1], 2, 3, 'model.Net', 28, 'data.py', 42, 0.25)",
        "4 0.5",
    ]
    log = harness.log()
    assert "def train(" in log  # it ran on the worker
    for name in ("data", "helpers", "model", "pkg", "pkg.util", "pkg.base", "nspkg.tools"):
        assert f"loaded shipped module {name} " in log, name
    assert "loaded shipped module config " not in log  # sent, but never imported there


OPS = """
import consts
import numpy as np


BASE = np.arange(3.0)  # made by the program at import: the worker's ops uses this one


def scaled_sum(row):
    return float(np.sum(row + BASE)) * consts.SCALE


class Scaler:
    def __init__(self, k):
        self.k = k * consts.SCALE
"""

MODULE_MODE = """
import numpy as np

import ops

table = np.arange(6.0).reshape(2, 3)
ops.BASE[0] = 100.0
print(np.apply_along_axis(ops.scaled_sum, 1, table).tolist())
print(np.vectorize(lambda k: ops.Scaler(k).k)(np.arange(3)).tolist())
"""


def test_a_shipped_function_of_a_sibling_module_uses_another_sibling(
    harness: WorkerHarness,
) -> None:
    _write(harness.root, {"ops.py": OPS, "consts.py": "SCALE = 10\n"})
    out = harness.same_as_local(MODULE_MODE, remote="numpy")
    assert out.splitlines() == ["[1060.0, 1150.0]", "[0, 10, 20]"]


NESTED_ON_NDARRAY = """
import numpy as np


class Sub(np.ndarray):  # a top-level Sub: the nested one must not replace it
    def which(self):
        return "top"


class TestX:
    class Sub(np.ndarray):
        def which(self):
            return "nested"

    @staticmethod
    def plus_one(x):
        return x + 1


a = np.arange(4).view(TestX.Sub)
print(type(a).__name__, type(a).__qualname__, type(a) is TestX.Sub)
print(isinstance(a, TestX.Sub), isinstance(a, np.ndarray), isinstance(a, Sub))
print(repr(a), a.which(), np.arange(2).view(Sub).which(), repr(np.arange(2).view(Sub)))
print(np.vectorize(TestX.plus_one)(np.arange(3)).tolist())


class Holder:
    class Sub(np.ndarray):
        def which(self):
            return "held"


print(np.full(2, Holder, dtype=object).size)  # Holder shipped whole: its body has Sub there
b = Holder.Sub((2,))  # constructed: another call site than view's above
b[:] = 7
print(type(b).__qualname__, b.which(), isinstance(b, Holder.Sub), isinstance(b, TestX.Sub))
"""


def test_a_class_nested_in_a_class_crosses_under_its_qualified_name(
    harness: WorkerHarness,
) -> None:
    out = harness.same_as_local(NESTED_ON_NDARRAY, remote="numpy")
    assert out.splitlines() == [
        "Sub TestX.Sub True",
        "True True False",
        "Sub([0, 1, 2, 3]) nested top Sub([0, 1])",
        "[1, 2, 3]",
        "2",
        "Holder.Sub held True False",
    ]


NESTED_IN_A_PLAIN_CLASS = """
import numpy as np


class Kinds:
    class Tagged(np.ndarray):
        def __array_finalize__(self, obj):
            self.tag = getattr(obj, "tag", "new")

        def same(self, other):  # on the worker: the global Kinds there holds this very class
            return isinstance(other, Kinds.Tagged) and type(self) is Kinds.Tagged

        def plain(self):
            return self.view(Kinds.Plain)

    class Plain(np.ndarray):
        pass


a = np.arange(3).view(Kinds.Tagged)  # the nested class first: Kinds goes whole
b = a + 1
print(type(b).__qualname__, type(b) is Kinds.Tagged, a.same(b), a.same(np.arange(2)))
p = a.plain()  # made there: an instance of the program's Kinds.Plain here too
print(type(p).__qualname__, type(p) is Kinds.Plain, isinstance(p, Kinds.Plain))
"""


def test_a_class_nested_in_a_plain_class_is_that_class_s_attribute_on_the_worker(
    harness: WorkerHarness,
) -> None:
    out = harness.same_as_local(NESTED_IN_A_PLAIN_CLASS, remote="numpy")
    assert out.splitlines() == ["Kinds.Tagged True True False", "Kinds.Plain True True"]


NESTED_MODULES = """
import torch
from torch import nn

torch.manual_seed(0)


class Outer(nn.Module):
    class Inner(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            return self.lin(x) * 2

    def __init__(self):
        super().__init__()
        self.inner = Outer.Inner()

    def forward(self, x):
        return self.inner(x).sum()


m = Outer()
print(type(m.inner).__name__, type(m.inner).__qualname__, isinstance(m.inner, Outer.Inner))
print(round(m(torch.ones(1, 2)).item(), 4))
print(m)
print(type(Outer.Inner()).__qualname__)


class Pair(nn.Module):
    class Part(nn.Module):
        def forward(self, x):
            return x + 1

    def __init__(self):
        super().__init__()
        self.part = Pair.Part()

    def same_kind(self, other):  # on the worker: one class Pair.Part there too
        return type(other) is type(self.part)


part = Pair.Part()  # the nested class first: its outer goes too, and its body defines Part
pair = Pair()
print(pair.same_kind(part), type(part) is type(pair.part), isinstance(part, Pair.Part))
"""


def test_a_module_nested_in_a_module_on_remote_bases(harness: WorkerHarness) -> None:
    out = harness.same_as_local(NESTED_MODULES, remote="torch,numpy")
    lines = out.splitlines()
    assert lines[0] == "Inner Outer.Inner True"
    assert lines[-2:] == ["Outer.Inner", "True True True"]


IN_A_FUNCTION = """
import dataclasses

import numpy as np


def make():
    class ArraySubclass(np.ndarray):
        pass

    return ArraySubclass


class TestX:
    def test_x(self):
        class ArraySubclass(np.ndarray):
            def double(self):
                return self * 2

        a = np.arange(3).view(ArraySubclass)
        print(type(a).__name__, type(a).__qualname__, isinstance(a, ArraySubclass), repr(a))
        print(repr(a.double()), type(a.double()) is ArraySubclass)
        return ArraySubclass


c1, c2 = make(), make()
a1, a2 = np.zeros(2).view(c1), np.zeros(2).view(c2)
print(c1 is c2, type(a1) is c1, type(a2) is c2, isinstance(a1, c2), isinstance(a2, c1))
print(type(a1[:1]) is c1, type(a2[:1]) is c2, type(a1 + 1) is c1)
TestX().test_x()


def point(x):
    @dataclasses.dataclass
    class Point:
        x: int

    return Point(x)


held = np.array([point(3), point(4)], dtype=object)
print(held[0].x + held[1].x)  # a plain class of a function's crosses too
"""


def test_a_class_defined_in_a_function_runs_on_the_worker(harness: WorkerHarness) -> None:
    out = harness.same_as_local(IN_A_FUNCTION, remote="numpy")
    assert out.splitlines()[:2] == ["False True True False False", "True True True"]
    assert "ArraySubclass TestX.test_x.<locals>.ArraySubclass True ArraySubclass([0, 1, 2])" in out


USES_THE_FUNCTION_S_VARIABLES = """
import numpy as np


def make(scale, offset):
    class Scaled(np.ndarray):
        def scaled(self):
            return self * scale + offset

    return Scaled


np.arange(3).view(make(2, 1))
"""


def test_a_local_class_using_its_function_s_variables_fails_in_one_clear_line(
    harness: WorkerHarness,
) -> None:
    done = harness.script(USES_THE_FUNCTION_S_VARIABLES, remote="numpy")
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last == (
        "radium_interposer.shipping.ShipError: make.<locals>.Scaled: a class defined inside a "
        "function cannot run on the worker when it uses that function's variables (offset, "
        "scale); pass them as arguments, or define the class at the top level of its module"
    ), done.stderr


VENDORED = """
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "vendor", "site-packages"))

import numpy as np

from shapes import Tripled

print(np.arange(3).view(Tripled).triple().tolist(), Tripled.__module__)
"""


def test_a_sibling_module_the_worker_cannot_import_still_has_its_classes_shipped(
    harness: WorkerHarness,
) -> None:
    """``shapes`` imports a package only this side has (installed, so never shipped): the
    worker cannot import ``shapes``, and its class is shipped alone, as before."""
    _write(
        harness.root,
        {
            "vendor/site-packages/progress_only_here.py": "def bar(x):\n    return x\n",
            "shapes.py": """
                import numpy as np
                import progress_only_here


                class Tripled(np.ndarray):
                    def triple(self):
                        return self * 3
                """,
        },
    )
    out = harness.same_as_local(VENDORED, remote="numpy")
    assert out.splitlines() == ["[0, 3, 6] shapes"]


NETDEFS = """
import torch
from torch import nn

print("netdefs imported")


class Net(nn.Module):
    class Head(nn.Module):  # nested, on remote bases, in a module of the program
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 1)

        def forward(self, x):
            return self.lin(x)

    def __init__(self):
        super().__init__()
        self.body = nn.Linear(2, 3)
        self.head = Net.Head()

    def forward(self, x):
        return self.head(torch.relu(self.body(x)))
"""

USES_NETDEFS = """
import torch

from netdefs import Net

torch.manual_seed(0)
net = Net()
print(type(net).__qualname__, type(net.head).__qualname__, type(net).__module__)
print(isinstance(net, Net), isinstance(net.head, Net.Head), type(net.head) is Net.Head)
print(round(net(torch.ones(1, 2)).item(), 4))
"""


def test_a_module_of_the_program_on_remote_bases_runs_there_under_its_own_name(
    harness: WorkerHarness,
) -> None:
    _write(harness.root, {"netdefs.py": NETDEFS})
    out = harness.same_as_local(USES_NETDEFS, remote="torch,numpy")
    assert out.splitlines()[:3] == [
        "netdefs imported",
        "Net Net.Head netdefs",
        "True True True",
    ]
    assert "loaded shipped module netdefs " in harness.log()


MANY_MODULES = """
import numpy as np

import parts


def shifted(row):  # shipped: its module's modules go to the worker first
    return row + parts.total()[0]


print(np.apply_along_axis(shifted, 0, np.zeros(2)).tolist())
"""


def test_a_program_with_more_modules_than_a_frame_carries(harness: WorkerHarness) -> None:
    # 70 modules of its own: more sources than one frame's 64 buffers (sent in several).
    files = {f"parts/m{i}.py": f"VALUE = {i}\n" for i in range(70)}
    imports = "".join(f"from parts import m{i}\n" for i in range(70))
    files["parts/__init__.py"] = imports + (
        "\n\ndef total():\n    return [sum(globals()[f'm{i}'].VALUE for i in range(70))]\n"
    )
    _write(harness.root, files)
    out = harness.same_as_local(MANY_MODULES, remote="numpy")
    assert out == "[2415.0, 2415.0]\n"
    assert "def shifted(" in harness.log()  # it ran there, with the modules it uses
