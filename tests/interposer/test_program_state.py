"""Shipped code sees the program's state, not the worker's (docs/remoting.md, "The program's
state"): the stdlib and numpy random generators, module globals as they are at each call, and
the client's own library objects (by pickle), each program's output equal to its local run."""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
import types

import pytest

from radium_interposer import codec, program_state
from radium_interposer.program_state import global_names
from tests.interposer.harness import WorkerHarness

RANDOM = """
import random
from random import choice, shuffle
from random import random as uniform01

import torch
from torch import nn

random.seed(0)


class Noisy(nn.Module):
    def forward(self, x):
        order = list(range(5))
        shuffle(order)
        return x * random.random() + uniform01(), order + [choice("abc")]


@torch.no_grad()
def draw(n):
    return [random.randint(0, 100) for _ in range(n)]


model = Noisy()
for step in range(3):
    y, order = model(torch.ones(2))
    print(step, round(y.sum().item(), 9), order, draw(2))
    print("here", random.random())  # drawn here between two remote calls
print("after", random.random(), random.getstate()[1][:3])
"""


def test_shipped_code_draws_from_the_program_s_seeded_random(harness: WorkerHarness) -> None:
    out = harness.same_as_local(RANDOM)
    assert len(out.splitlines()) == 7


LATE = """
import argparse

import torch

SCALE = 2


@torch.no_grad()  # ships evaluate now, before `args` and `offset` exist
def evaluate(x):
    return (x * args.factor * SCALE).sum().item() + offset


class Scaled(torch.nn.Module):
    factor = SCALE  # a class body's global (LOAD_NAME)

    def forward(self, x):
        return x * self.factor + offset


@torch.no_grad()
def helper(torch):  # a parameter shadowing the module: a local, not the module
    SCALE = "local"  # a local shadowing a global: not sent, not watched
    return SCALE, torch


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--factor", type=float, default=3.0)
    args = parser.parse_args([])
    offset = 1
    print(evaluate(torch.ones(3)))
    offset = 10  # rebound between two calls
    print(evaluate(torch.ones(3)), Scaled()(torch.ones(1)).item())
    args = parser.parse_args(["--factor", "5"])
    print(evaluate(torch.ones(3)), helper(1))
"""


def test_globals_are_the_program_s_at_each_call(harness: WorkerHarness) -> None:
    out = harness.same_as_local(LATE)
    assert out.splitlines() == ["19.0", "28.0 12.0", "40.0 ('local', 1)"]


def test_only_the_globals_a_definition_uses_are_its_globals() -> None:
    source = textwrap.dedent(
        """
        @decorate(DEFAULT)
        def f(x, torch=None, *, n: Hint = LIMIT):
            data = [i for i in range(n) if i % STEP]
            def inner():
                global COUNT
                COUNT = len(data)
                return CLOSED
            return data, torch, inner


        class C(Base):
            size = SIZE
        """
    )
    names = global_names(source)
    assert names >= {"decorate", "DEFAULT", "Hint", "LIMIT", "range", "STEP", "COUNT", "CLOSED"}
    assert names >= {"Base", "SIZE", "len"}
    assert not names & {"data", "torch", "x", "n", "i", "inner"}


def _split_program(
    harness: WorkerHarness, source: str, functions: list[str]
) -> subprocess.CompletedProcess[str]:
    """``main.py`` run by a Python that has torch and numpy, with only its ``functions``
    remoted (function mode), checked against its local run."""
    path = harness.root / "main.py"
    path.write_text(textwrap.dedent(source))
    split = harness.root / "split.toml"
    entries = ", ".join(f'"main:{name}"' for name in functions)
    split.write_text(f"functions = [{entries}]\n")
    env = harness.env("", RADIUM_SPLIT=str(split))
    remoted = subprocess.run(
        [sys.executable, str(path)], env=env, capture_output=True, text=True, cwd=harness.root
    )
    local = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, cwd=harness.root
    )
    assert local.returncode == 0, local.stderr
    assert remoted.returncode == 0, remoted.stderr
    assert remoted.stdout == local.stdout
    assert "remote True" in remoted.stderr and "remote False" in local.stderr
    return remoted


CLIENT_OBJECTS = """
import os
import sys

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
DEVICE = torch.device("cpu")
W_target = torch.tensor([[0.5], [-1.0]])
teacher = nn.Linear(2, 1)
PID = os.getpid()


class Student(nn.Module):  # the program's class on a library base: pickled, shipped first
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 1)

    def forward(self, x):
        return self.fc(x)


class Pairs(Dataset):
    def __init__(self, x):
        self.x = x

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i]


def train(device, x, student, opt, steps):
    y = (x @ W_target + teacher(x)).detach()
    for _ in range(steps):
        loss = ((student(x.to(device)) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    noise = np.random.rand(2).tolist() + torch.randn(2).tolist()  # the program's generators
    return round(loss.item(), 6), [round(v, 6) for v in noise], os.getpid() != PID


def evaluate(student, loader):
    return [round(student(batch).sum().item(), 5) for batch in loader]


np.random.seed(1)
x = torch.randn(8, 2)
student = Student()
opt = torch.optim.SGD(student.parameters(), lr=0.1)  # the same parameters as student's
for _ in range(2):  # the second call trains the worker's same copy further
    loss, noise, remote = train(DEVICE, x, student, opt, 10)
    print(loss, noise)
loader = DataLoader(Pairs(x), batch_size=4)
print(evaluate(student, loader))
print("here", round(student(x).sum().item(), 5))  # the program's model: trained remotely
with torch.no_grad():
    student.fc.bias.data.add_(1.0)  # changed here (no version counter moves): seen there
print(evaluate(student, loader))
print("remote", remote, file=sys.stderr)
print("after", np.random.rand(), torch.rand(1).item())
"""


def test_the_client_s_own_torch_objects_cross_by_pickle(harness: WorkerHarness) -> None:
    """A torch.device, tensors, modules (the program's own class too) and an optimizer as
    arguments and as globals, each the same copy on the worker from call to call and kept
    equal to the program's own at each call, and numpy's and torch's global generators, all
    the client's own (function mode)."""
    _split_program(harness, CLIENT_OBJECTS, ["train", "evaluate"])


UNSENDABLE = """
import random
import threading

import torch

LOCK = threading.Lock()


def train(x):
    if isinstance(x, torch.Tensor):
        with LOCK:
            return x + 1
    return x


for value in (random.Random(0), torch.ones(1)):
    try:
        train(value)
    except Exception as exc:
        print(type(exc).__name__, str(exc).splitlines()[0])
"""


def test_a_global_that_cannot_be_sent_fails_loudly_where_it_is_used(
    harness: WorkerHarness,
) -> None:
    path = harness.root / "main.py"
    path.write_text(textwrap.dedent(UNSENDABLE))
    split = harness.root / "split.toml"
    split.write_text('functions = ["main:train"]\n')
    done = subprocess.run(
        [sys.executable, str(path)],
        env=harness.env("", RADIUM_SPLIT=str(split)),
        capture_output=True,
        text=True,
        cwd=harness.root,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        # The standard library's objects are not pickled: a copy would fork the program's state.
        "EncodeError a random.Random cannot cross the data plane",
        "GlobalNotSent global 'LOCK' of __main__ (a _thread.lock) is used by code shipped to the "
        "worker but could not be sent: a _thread.lock cannot cross the data plane",
    ]


def test_the_client_never_unpickles_what_the_worker_sends() -> None:
    tree = {"$": "pk", "i": 0, "oob": []}
    with pytest.raises(codec.DecodeError, match="never unpickles"):
        codec.decode(tree, [pickle.dumps(1)], lambda node: None)


def test_the_per_call_check_sees_rebound_appearing_and_deleted_globals() -> None:
    module = types.ModuleType("radium_test_watched")
    module.a, module.b, module.c = [1], [2], None
    sys.modules[module.__name__] = module
    try:
        for name in ("a", "b", "c"):
            program_state.watch(module.__name__, name, getattr(module, name))
        program_state.watch(module.__name__, "late")
        assert program_state._unchanged(module.__name__)
        module.a.append(3)  # mutated in place: not seen (documented)
        assert program_state._unchanged(module.__name__)
        module.b = [2]  # an equal value, but rebound
        assert not program_state._unchanged(module.__name__)
        program_state.watch(module.__name__, "b", module.b)  # sent again
        assert program_state._unchanged(module.__name__)
        module.late = 1
        assert not program_state._unchanged(module.__name__)
        program_state.watch(module.__name__, "late", module.late)
        del module.c
        assert not program_state._unchanged(module.__name__)
    finally:
        del sys.modules[module.__name__]
        program_state._watched.pop(module.__name__, None)
        program_state._fast.pop(module.__name__, None)
