"""Programs as users write them, remoted from a Python without the framework: classes written
on remote bases, remote classes as local types, Python values by structure, the user's own
functions as arguments. Each program's output must equal its local run's (docs/remoting.md)."""

from __future__ import annotations

import subprocess

from tests.interposer.harness import BARE_PYTHON, WorkerHarness

TRAINING = """
import argparse
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


@dataclass
class Config:
    lr: float = 0.1
    epochs: int = 3


class Squares(Dataset):
    def __init__(self, n):
        self.x = torch.linspace(-1, 1, n).unsqueeze(1)
        self.y = self.x ** 2

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class Clamp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * (x > 0).float()


class Net(nn.Module):
    calls = 0  # class-level state, kept on the worker

    def __init__(self, hidden):
        super().__init__()
        self.fc1 = nn.Linear(1, hidden)
        self.fc2 = nn.Linear(hidden, 1)

    @property
    def width(self):
        return self.fc1.out_features

    def forward(self, x):
        Net.calls += 1
        return self.fc2(Clamp.apply(self.fc1(x)))


class Wider(Net):
    def __init__(self):
        super().__init__(hidden=32)


def init_weights(m):
    if isinstance(m, nn.Linear):
        nn.init.constant_(m.bias, 0.01)


def train(args, config, model, loader):
    opt = torch.optim.SGD(model.parameters(), lr=config.lr)
    loss_fn = nn.MSELoss()
    for epoch in range(config.epochs):
        total = 0.0
        for x, y in loader:
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            total += loss.item()
        print(f"epoch {epoch} loss {total:.6f}")


parser = argparse.ArgumentParser()
parser.add_argument("--hidden", type=int, default=16)
args = parser.parse_args([])
torch.manual_seed(0)
model = Net(args.hidden)
model.apply(init_weights)
train(args, Config(), model, DataLoader(Squares(64), batch_size=16))
print(type(model) is Net, isinstance(model, nn.Module), issubclass(Wider, Net), model.width)
print(Net.calls, len(Squares(10)), isinstance(Squares(4), Dataset), Wider().width)
with torch.no_grad():
    print([round(v, 4) for v in model(torch.tensor([[0.5]])).flatten().tolist()])
"""


def test_a_training_program_with_its_own_classes_runs_as_locally(harness: WorkerHarness) -> None:
    out = harness.same_as_local(TRAINING)
    assert out.splitlines()[-3:] == ["True True True 16", "12 10 True 32", "[0.387]"]


TYPES = """
import torch
x = torch.ones(2)
p = torch.nn.Parameter(torch.ones(1))
print(isinstance(x, torch.Tensor), type(x) is torch.Tensor, type(x).__name__)
print(isinstance(p, torch.Tensor), type(p) is torch.Tensor, isinstance(3, torch.Tensor))
print(issubclass(torch.nn.Linear, torch.nn.Module), issubclass(torch.nn.Module, torch.nn.Linear))
print(torch.nn.Module is torch.nn.modules.module.Module, torch.Tensor is type(torch.zeros(1)))
print(torch.__version__ > "2", torch.__name__, torch.__file__.endswith("__init__.py"))
print(isinstance(torch.nn.Linear(2, 2), (torch.nn.Module, int)))
try:
    torch.linalg.inv(torch.zeros(2, 2))
except torch.linalg.LinAlgError as e:
    print("caught", type(e).__name__, isinstance(e, RuntimeError))
print(torch.zeros(2, dtype=torch.float64).dtype, torch.ones(3).to(int).dtype, x.to(bool).dtype)
"""


def test_remote_classes_are_local_types(harness: WorkerHarness) -> None:
    out = harness.same_as_local(TYPES)
    assert out.splitlines()[:2] == ["True True Tensor", "True False False"]


VALUES = """
import argparse, collections, dataclasses, datetime, decimal, enum, fractions, pathlib, types
from typing import NamedTuple
import numpy as np
import pprint


@dataclasses.dataclass
class Config:
    lr: float
    name: str = "run"


class Point(NamedTuple):
    x: int
    y: int


class Color(enum.Enum):
    RED = 1


values = [
    argparse.Namespace(epochs=2, layers=[8, 4]), types.SimpleNamespace(k="v"), Config(0.5),
    Point(1, 2), Color.RED, pathlib.PurePosixPath("/data/x.csv"),
    datetime.datetime(2026, 11, 23, 12, 30, tzinfo=datetime.timezone.utc),
    datetime.timedelta(days=1, seconds=2), decimal.Decimal("1.10"), fractions.Fraction(1, 3),
    collections.OrderedDict(b=1, a=2), collections.Counter("aab"), collections.deque([1], 3),
    collections.defaultdict(list, k=[1]), bool, float,
]
for value in values:
    print(pprint.pformat(value, width=200))  # the worker's own repr of what it received
print(np.ones(3, dtype=bool).dtype, np.arange(4).astype(float).dtype, np.zeros(1, int).dtype)
print(np.array([1.5, 2.5]).astype(int).tolist())
"""


def test_python_values_cross_by_structure(harness: WorkerHarness) -> None:
    out = harness.same_as_local(VALUES, remote="numpy,pprint")
    assert "Config(lr=0.5, name='run')" in out and "Point(x=1, y=2)" in out


FUNCTIONS = """
import numpy as np
from radium_interposer import callbacks


def double(x):
    return 2 * x


def main():
    print(np.vectorize(double)(np.arange(4)).tolist())
    print(np.apply_along_axis(double, 0, np.ones((2, 2))).tolist())
    print("called back", callbacks.held())  # shipped: nothing of ours is held by the worker


main()
"""


def test_the_user_s_top_level_functions_are_shipped_not_called_back(
    harness: WorkerHarness,
) -> None:
    done = harness.script(FUNCTIONS, remote="numpy")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "[0, 2, 4, 6]",
        "[[2.0, 2.0], [2.0, 2.0]]",
        "called back False",
    ]


EXITS = """
import argparse


def parse(argv):
    parser = argparse.ArgumentParser(prog="train")
    parser.add_argument("--epochs", type=int, required=True)
    return parser.parse_args(argv)


def stop(code):
    raise SystemExit(code)
"""


def test_remote_exits_reach_the_client_and_the_worker_lives_on(harness: WorkerHarness) -> None:
    (harness.root / "cli.py").write_text(EXITS)
    done = harness.script(
        """
        import cli
        print(cli.parse(["--epochs", "3"]).epochs)
        try:
            cli.stop(3)
        except SystemExit as e:
            print("SystemExit", e.code)
        cli.parse([])  # argparse's usage message, then exit status 2, as locally
        """,
        remote="cli:parse,cli:stop",
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout.splitlines() == ["3", "SystemExit 3"]
    assert "the following arguments are required: --epochs" in done.stderr
    assert harness.worker.poll() is None  # the worker survived all of it


DECORATED = """
import torch


@torch.no_grad()
def evaluate(x):
    print("grad inside:", torch.is_grad_enabled())
    return (x * 2).sum().item()


steps = torch.zeros(1)
for i in range(3):
    print("evaluate", evaluate(torch.ones(2) * i), torch.is_grad_enabled())
"""


def test_a_remote_decorator_runs_the_user_s_function_remotely(harness: WorkerHarness) -> None:
    out = harness.same_as_local(DECORATED)
    assert out.splitlines()[:2] == ["grad inside: False", "evaluate 0.0 True"]


PIPELINED_OUTPUT = """
import numpy as np
import noisy

x = np.zeros(2)
for i in range(4):
    x = noisy.step(x, i)  # after the first, pipelined: no answer per call
print("total", float(x.sum()))
"""


def test_what_pipelined_calls_print_still_reaches_the_client(harness: WorkerHarness) -> None:
    (harness.root / "noisy.py").write_text(
        "def step(x, i):\n    print('step', i)\n    return x + 1\n"
    )
    done = harness.script(PIPELINED_OUTPUT, remote="numpy,noisy:step")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["step 0", "step 1", "step 2", "step 3", "total 8.0"]


COPIES = """
import copy
import pickle

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(3, 2)
twin = copy.deepcopy(model)  # copied on the worker: changing the copy leaves the model alone
with torch.no_grad():
    twin.weight.fill_(1.0)
print(type(twin).__name__, twin is model, round(model.weight.sum().item(), 6))
print(twin.weight.sum().item())
t = torch.arange(4.0)
print(copy.copy(t).tolist(), copy.copy(t) is t)
blob = pickle.dumps(model.state_dict())  # the worker's pickle bytes
print(type(blob).__name__)
fresh = nn.Linear(3, 2)
print(fresh.load_state_dict(pickle.loads(blob)), torch.equal(fresh.weight, model.weight))
restored = pickle.loads(pickle.dumps(twin))
print(restored.weight.sum().item(), isinstance(restored, nn.Linear))
nested = copy.deepcopy({"model": model, "step": 3})
print(sorted(nested), nested["model"] is model)
"""


def test_copies_and_pickles_of_remote_objects_are_made_by_the_worker(
    harness: WorkerHarness,
) -> None:
    out = harness.same_as_local(COPIES)
    assert out.splitlines()[:2] == ["Linear False -0.662235", "6.0"]
    assert "<All keys matched successfully> True" in out


SCRIPT = """
import argparse
import os
import sys

import numpy as np

SCALE = 3


def parse():
    parser = argparse.ArgumentParser(prog="train")
    parser.add_argument("--epochs", type=int, required=True)
    return parser.parse_args()


def train_step(x):
    seen = (sys.argv[1:], os.environ.get("RUN_NAME"), os.environ.get("SECRET_TOKEN"))
    return float(np.asarray(x).sum() * SCALE), os.getpid(), seen


def main():
    args = parse()
    total, pid, seen = train_step([1.0, 2.0])
    print("epochs", args.epochs, "total", total, "remote", pid != os.getpid(), seen)


if __name__ == "__main__":
    main()
"""


def test_split_entries_apply_to_the_program_as_run_with_its_argv_and_allowed_environment(
    harness: WorkerHarness,
) -> None:
    (harness.root / "train.py").write_text(SCRIPT)
    (harness.root / "pkg").mkdir()
    (harness.root / "pkg" / "__init__.py").write_text("")
    (harness.root / "pkg" / "train.py").write_text(SCRIPT)
    split = harness.root / "split.toml"
    split.write_text(
        'modules = ["numpy"]\n'
        'functions = ["train:train_step", "train:parse", "pkg.train:train_step", "train:typo"]\n'
        'environment = ["RUN_*"]\n'
    )

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        env = harness.env("", RADIUM_SPLIT=str(split), RUN_NAME="r1", SECRET_TOKEN="s3cr3t")
        return subprocess.run(
            [BARE_PYTHON, *argv], env=env, capture_output=True, text=True, cwd=harness.root
        )

    script = run("train.py", "--epochs", "3")
    assert script.returncode == 0, script.stderr
    assert script.stdout == "epochs 3 total 9.0 remote True (['--epochs', '3'], 'r1', None)\n"
    assert "split entry typo: the main module defines no such function" in script.stderr
    module = run("-m", "pkg.train", "--epochs", "4")
    assert module.returncode == 0, module.stderr
    assert module.stdout == "epochs 4 total 9.0 remote True (['--epochs', '4'], 'r1', None)\n"
    usage = run("train.py")  # argparse on the worker, with our argv: its usage, and status 2
    assert usage.returncode == 2
    assert "train: error: the following arguments are required: --epochs" in usage.stderr
    assert harness.worker.poll() is None
