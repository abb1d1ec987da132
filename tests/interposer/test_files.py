"""Remote code reads and writes the client program's files, never the acceptor's disk
(docs/remoting.md, "Files"): open, torch.save/load, np.save/load/savez/savetxt/loadtxt."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from radium_interposer import client_files
from tests.interposer.harness import INTERPOSER, WorkerHarness

INTERPOSER_PACKAGE = os.path.dirname(os.path.abspath(client_files.__file__))

PROGRAM = """
import os

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset


class Rows(Dataset):  # defined on the worker: its open() reads the client's file
    def __init__(self, path):
        with open(os.path.abspath(path)) as f:  # the worker's getcwd is the client's
            self.rows = [[float(v) for v in line.split(",")] for line in f]

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return torch.tensor(self.rows[i])


torch.manual_seed(0)
model = nn.Linear(3, 2)
torch.save(model.state_dict(), "ckpt.pt")
print("checkpoint here:", os.path.getsize("ckpt.pt") > 1000)
fresh = nn.Linear(3, 2)
print(fresh.load_state_dict(torch.load("ckpt.pt")), torch.equal(fresh.weight, model.weight))
np.save("a.npy", np.arange(10) * 3)
print("a.npy", np.load("a.npy").tolist())
np.savez("b.npz", x=np.ones(2), y=np.arange(3))
with np.load("b.npz") as z:
    print("b.npz", sorted(z.files), z["y"].tolist())
np.savetxt("c.csv", np.arange(6.0).reshape(2, 3), delimiter=",")
print("c.csv", np.loadtxt("c.csv", delimiter=",").sum())
data = Rows("c.csv")
print("rows", len(data), data[1].tolist())
big = np.arange(3_000_000, dtype=np.float64)  # 24 MB: streamed in chunks, both ways
np.save(os.path.abspath("big.npy"), big)
print("big", os.path.getsize("big.npy"), float(np.load("big.npy").sum()))
try:
    np.load("missing.npy")
except FileNotFoundError as e:
    print("FileNotFoundError", e.errno)
print(sorted(f for f in os.listdir(".") if f.endswith((".pt", ".npy", ".npz", ".csv"))))
"""


def test_remote_code_uses_the_client_s_files(harness: WorkerHarness) -> None:
    out = harness.same_as_local(PROGRAM, remote="torch,numpy")
    assert out.splitlines()[0] == "checkpoint here: True"
    assert "big 24000128 4499998500000.0" in out
    assert out.splitlines()[-1] == "['a.npy', 'b.npz', 'big.npy', 'c.csv', 'ckpt.pt']"
    leftovers = [p.name for p in (harness.root / "worker").iterdir()]
    assert leftovers == []  # nothing landed on the worker's side


CHECKPOINTS = """
import os

import torch
from torch import nn


def checkpoint(model, epoch):  # remoted by the split file: its os calls run on the worker
    os.makedirs("ckpts", exist_ok=True)
    path = os.path.join("ckpts", f"epoch{epoch}.pt")
    torch.save(model.state_dict(), path)
    listed = sorted(os.listdir("ckpts"))
    if os.path.exists("ckpts/latest.pt"):
        os.remove("ckpts/latest.pt")
    os.rename(path, "ckpts/latest.pt")
    return listed, os.path.getsize("ckpts/latest.pt") > 500, os.path.isdir("ckpts")


model = nn.Linear(2, 2)
for epoch in range(2):
    print(checkpoint(model, epoch))
print(sorted(os.listdir("ckpts")), os.path.isfile("ckpts/latest.pt"))
"""


def test_remote_os_calls_on_the_client_s_paths_reach_the_client(harness: WorkerHarness) -> None:
    split = harness.root / "split.toml"
    split.write_text('modules = ["torch"]\nfunctions = ["app:checkpoint"]\n')
    out = harness.same_as_local(CHECKPOINTS, remote="", RADIUM_SPLIT=str(split))
    assert out.splitlines() == [
        "(['epoch0.pt'], True, True)",
        "(['epoch1.pt', 'latest.pt'], True, True)",
        "['latest.pt'] True",
    ]
    assert "def checkpoint(" in harness.log()  # it did run on the worker
    assert list((harness.root / "worker").iterdir()) == []


class FakeClient:
    """Stands for the connection: serves the file calls from a real file here."""

    def __init__(self, tmp_path: Path) -> None:
        self.dir = tmp_path
        self.files: dict[int, Any] = {}
        self.sizes: list[int] = []

    def __call__(self, meta: dict[str, Any], buffers: list[Any]) -> tuple[dict[str, Any], list]:
        if meta["op"] == "open":
            self.files[1] = open(self.dir / meta["path"], meta["mode"])  # noqa: SIM115
            return {"v": 1}, []
        handle, method = self.files[meta["f"]], meta["m"]
        if method == "write":
            self.sizes.append(len(buffers[0]))
            return {"v": handle.write(buffers[0])}, []
        if method == "read":
            data = handle.read(meta["a"][0])
            self.sizes.append(len(data))
            return {"v": {"$": "b", "i": 0}}, [data]
        return {"v": getattr(handle, method)(*meta["a"])}, []


def test_large_files_move_in_bounded_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeClient(tmp_path)
    monkeypatch.setattr(client_files, "_call", fake)
    data = os.urandom(client_files.CHUNK * 2 + 12345)
    with client_files.open_client_or_local("blob.bin", "wb") as f:
        f.write(data)
    assert (tmp_path / "blob.bin").read_bytes() == data
    assert max(fake.sizes) <= client_files.CHUNK and len(fake.sizes) >= 3
    fake.sizes.clear()
    with client_files.open_client_or_local("blob.bin", "rb") as f:
        assert f.read() == data
    assert max(fake.sizes) <= client_files.CHUNK and len(fake.sizes) >= 3


def test_a_stat_of_the_client_s_file_keeps_its_exact_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's os.stat of a client path, through the client's real fs service and the
    codec both ways: nanosecond times survive (os.path.getmtime, make-style checks)."""
    from radium_interposer import codec, file_service, worker_files

    def client(meta: dict[str, Any], buffers: list[Any]) -> tuple[dict[str, Any], list[Any]]:
        out: list[Any] = []
        return {"v": codec.encode(file_service.use_fs(meta), out, lambda _: None)}, out

    monkeypatch.setattr(client_files, "_call", client)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.pt").write_bytes(b"x")
    os.utime(tmp_path / "x.pt", ns=(1_500_000_123, 2_500_000_456))
    info = worker_files._stat("x.pt")
    assert info.st_mtime_ns == 2_500_000_456 == os.stat("x.pt").st_mtime_ns
    assert info.st_mtime == os.stat("x.pt").st_mtime
    assert info.st_size == 1


@pytest.mark.parametrize(
    ("path", "client"),
    [
        ("ckpt.pt", True),
        ("data/train.csv", True),
        ("/home/me/ckpt.pt", True),
        ("/data/set.npy", True),
        ("/usr/lib/python3/dist-packages/x.py", False),
        ("/proc/self/status", False),
        ("/tmp/scratch", False),
        ("/lease/work", False),
        (os.path.join(os.__file__), False),  # the worker's own Python
        ("https://example.org/a.csv", False),
        (3, False),
        ("", False),
    ],
)
def test_which_paths_are_the_client_s(path: Any, client: bool) -> None:
    assert client_files.is_client_path(path) is client


def test_the_worker_s_own_import_path_is_not_the_client_s() -> None:
    """A worker started with a PYTHONPATH looks for its imports there itself (each probe was a
    call to the client, and one to a client that never answers waited out its deadline).
    The directory need not exist: it is a name outside the worker's system areas."""
    probe = (
        "from radium_interposer import client_files as f;"
        "print(f.is_client_path('/srv/radium-site/x.py'), f.is_client_path('/srv/other/x.py'))"
    )
    env = {**os.environ, "PYTHONPATH": f"/srv/radium-site:{INTERPOSER}"}
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, cwd="/", capture_output=True, text=True, timeout=60
    )
    assert done.stdout.split() == ["False", "True"], done.stderr


def test_the_worker_s_own_package_is_not_the_client_s_wherever_it_lies() -> None:
    """Loaded from a directory on no import path (an editable install, a checkout): a
    traceback or a warning through the worker's own frames stats its files, and each stat was
    a call to the client. A sibling directory of the package's stays the client's."""
    package = os.path.dirname(INTERPOSER_PACKAGE)
    probe = (
        "import importlib.util, os, sys\n"
        f"init = {os.path.join(INTERPOSER_PACKAGE, '__init__.py')!r}\n"
        "spec = importlib.util.spec_from_file_location(\n"
        "    'radium_interposer', init, submodule_search_locations=[os.path.dirname(init)])\n"
        "sys.modules['radium_interposer'] = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(sys.modules['radium_interposer'])\n"
        "from radium_interposer import client_files as f\n"
        f"print(f.is_client_path(f.__file__), f.is_client_path({package + '-other/x.py'!r}))"
    )
    env = {"PATH": os.environ["PATH"]}
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, cwd="/", capture_output=True, text=True, timeout=60
    )
    assert done.stdout.split() == ["False", "True"], done.stderr


@pytest.mark.parametrize(
    "meta",
    [
        {"m": "rmdir", "a": ["x"]},
        {"m": "mkdir", "a": ["x"]},
        {"m": "mkdir", "a": ["x", "777"]},
        {"m": "rename", "a": ["x", ""]},
        {"m": "remove", "a": [""]},
        {"m": "stat", "a": ["a\0b", True]},
        {"m": "listdir", "a": "."},
    ],
)
def test_the_client_refuses_malformed_filesystem_requests(
    meta: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from radium_interposer import file_service

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError):
        file_service.use_fs(meta)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "kwargs", "named"),
    [
        (("ckpt.pt",), {}, True),
        (("data/train",), {}, True),
        ((Path("weights"),), {}, True),
        ((), {"f": "model.pt"}, True),
        (("cuda:0",), {}, False),
        ((1, 2), {"reduction": "mean"}, False),
        (("ij,jk->ik",), {}, False),
    ],
)
def test_calls_that_may_name_a_file_are_not_pipelined(
    args: tuple[Any, ...], kwargs: dict[str, Any], named: bool
) -> None:
    """They wait, so a missing file raises at the call; device and mode strings keep
    pipelining."""
    from radium_interposer import file_args

    assert file_args.may_name_a_file(args, kwargs) is named
