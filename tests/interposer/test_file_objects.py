"""The program's own file objects passed to remote calls (docs/remoting.md, "Your files and
array objects, passed by reference"): they cross by reference, remote code reads and writes
the program's very file, and every position, content and error is the local run's."""

from __future__ import annotations

import pytest

from tests.interposer.harness import WorkerHarness

HELPERS = """
import hashlib, io, os, struct, sys, tempfile, wave

import numpy as np


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]
"""

NUMPY = (
    HELPERS
    + """
a = np.arange(12, dtype=np.float32).reshape(3, 4)
with open("a.npy", "wb") as f:
    np.save(f, a)
    np.save(f, a * 2)
    print("open after save:", f.closed, f.tell())
print("closed after with:", f.closed, digest("a.npy"))
with open("a.npy", "rb") as f:
    first = np.load(f)
    print("tell after a load:", f.tell())
    second = np.load(f)
    print(first.sum(), second.sum(), f.tell(), f.read() == b"")
    f.seek(0)
    print("again after seek:", np.load(f).sum(), f.tell())

with open("raw.bin", "wb") as f:  # a header written here, the array remotely, then a footer
    f.write(struct.pack("<4sI", b"HEAD", 7))
    np.arange(7, dtype=np.int16).tofile(f)
    f.write(b"END")
    print("raw tell:", f.tell())
print("raw:", digest("raw.bin"))
with open("raw.bin", "rb") as f:
    magic, n = struct.unpack("<4sI", f.read(8))  # a partial read here, numpy goes on from it
    values = np.fromfile(f, dtype=np.int16, count=n)
    print(magic, values.tolist(), f.tell(), f.read())
    f.seek(8)
    print("offset:", np.fromfile(f, dtype=np.int16, count=2, offset=4).tolist(), f.tell())
    f.seek(8)
    rest = np.fromfile(f, dtype=np.int16)  # to the end: whole items only
    print("rest:", rest.tolist(), f.tell())

with open("t.txt", "w") as f:
    np.arange(6.0).tofile(f, sep=",")
print("sep text:", open("t.txt").read())
with open("t.txt") as f:
    print("fromfile sep:", np.fromfile(f, sep=",").tolist(), f.tell())

with open("wave.wav", "wb") as raw:  # a wave writer here, its samples written remotely
    with wave.open(raw, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(np.arange(-50, 50, dtype=np.int16).tobytes())
print("wave:", digest("wave.wav"))
with wave.open("wave.wav", "rb") as w:
    frames = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16)
    print("frames:", frames.sum(), frames.shape)
with open("wave.wav", "rb") as f:
    f.read(44)
    samples = np.fromfile(f, dtype=np.int16)
    print("samples:", samples[:3].tolist(), samples.shape, f.tell())

with tempfile.TemporaryFile() as tmp, tempfile.NamedTemporaryFile(suffix=".npy") as named:
    for target in (tmp, named):
        np.save(target, a)
        target.seek(0)
        print("temporary:", np.load(target).sum(), target.tell())

try:
    with open("a.npy", "rb") as f:
        np.save(f, a)
except Exception as e:
    print("read-only:", type(e).__name__, e)
print("unchanged:", digest("a.npy"))
try:
    np.load(open("missing.npy", "rb"))
except FileNotFoundError as e:
    print("missing:", e.errno)
try:
    np.load(f)  # closed by its with block above
except ValueError as e:
    print("closed:", e)
"""
)

TEXT = (
    HELPERS
    + """
a = np.arange(6.0).reshape(2, 3)
with open("t.csv", "w") as f:
    f.write("# made here\\n")
    np.savetxt(f, a, delimiter=",", fmt="%.2f")
    f.write("# and here\\n")
    print("text tell:", f.tell())
print("csv:", digest("t.csv"))
with open("t.csv") as f:
    print("first line here:", f.readline().strip())
    print(np.loadtxt(f, delimiter=",", max_rows=1).tolist())  # one row, then stops there
    print("next line here:", f.readline().strip())
with open("t.csv") as f:
    print(np.genfromtxt(f, delimiter=",", comments="#").tolist(), f.read() == "")
with open("t.csv") as f:  # a callback of the program per value, between remote reads
    seen = []
    twice = np.loadtxt(f, delimiter=",", converters=lambda s: seen.append(s) or 2 * float(s),
                       max_rows=1, skiprows=1)
    print("converters:", twice.tolist(), seen, f.readline().strip())
with open("t.csv", "rb") as f:  # binary: numpy decodes the lines
    print("binary loadtxt:", np.loadtxt(f, delimiter=",", comments="#").sum(), f.read())
with open("b.csv", "wb") as f:
    np.savetxt(f, a, fmt="%d")
print("b.csv:", open("b.csv").read().split())

s = io.StringIO()
np.savetxt(s, a, fmt="%g", header="h")
print(repr(s.getvalue()), s.tell())
s.seek(0)
print(np.loadtxt(s).tolist(), s.tell())
lines = io.StringIO("1 2\\n3 4\\n5 6\\n")
print(lines.readline().strip(), np.loadtxt(lines, max_rows=1).tolist(), lines.read())
b = io.BytesIO()
np.save(b, a)
print("BytesIO:", len(b.getvalue()), b.tell())
b.seek(0)
print(np.load(b).sum(), b.tell())
np.savetxt(sys.stdout, a, fmt="%.1f")  # the program's own stdout, in order with print
print("after stdout")
"""
)

TORCH = (
    HELPERS
    + """
import torch

state = {"w": torch.arange(6.0).reshape(2, 3), "b": torch.ones(2, dtype=torch.int64)}
with open("t.pt", "wb") as f:
    f.write(b"")
    torch.save(state, f)
    print("open after torch.save:", f.closed, f.tell() == os.path.getsize("t.pt") or "later")
print("t.pt:", digest("t.pt"))
with open("t.pt", "rb") as f:
    back = torch.load(f)
    print(sorted(back), back["w"].sum().item(), back["b"].dtype, f.closed)
buf = io.BytesIO()
torch.save(state, buf)
print("BytesIO:", buf.tell() == len(buf.getvalue()), hashlib.sha256(buf.getvalue()).digest()[:8])
buf.seek(0)
print(torch.load(buf)["b"].tolist())
"""
)


@pytest.mark.parametrize("program", [NUMPY, TEXT], ids=["numpy", "text"])
def test_numpy_reads_and_writes_the_program_s_file_objects(
    harness: WorkerHarness, program: str
) -> None:
    out = harness.same_as_local(program, remote="numpy")
    assert "Traceback" not in out


def test_numpy_file_objects_give_the_local_positions_and_errors(harness: WorkerHarness) -> None:
    out = harness.same_as_local(NUMPY, remote="numpy")
    assert "open after save: False 352" in out
    assert "b'HEAD' [0, 1, 2, 3, 4, 5, 6] 22 b'END'" in out
    assert "read-only: UnsupportedOperation write" in out
    assert "missing: 2" in out
    assert "closed: read of closed file" in out


def test_torch_saves_and_loads_through_the_program_s_file_objects(harness: WorkerHarness) -> None:
    out = harness.same_as_local(TORCH, remote="torch,numpy")
    assert "['b', 'w'] 15.0 torch.int64 False" in out


SPLIT = """
import numpy as np


def write_rows(f, rows):  # remoted by the split file: it runs on the worker, f stays here
    f.write("# rows\\n")
    np.savetxt(f, np.arange(rows * 2.0).reshape(rows, 2), fmt="%.1f")
    return f.tell()


def read_rows(f):
    header = f.readline()
    return header.strip(), np.loadtxt(f, max_rows=2).tolist()


with open("rows.txt", "w") as f:
    print("wrote up to", write_rows(f, 4), f.tell())
    f.write("# end\\n")
with open("rows.txt") as f:
    print(read_rows(f))
    print("next here:", f.readline().strip())
print(open("rows.txt").read())
"""


def test_the_program_s_own_remoted_functions_use_its_file_objects(harness: WorkerHarness) -> None:
    split = harness.root / "split.toml"
    split.write_text('modules = ["numpy"]\nfunctions = ["app:write_rows", "app:read_rows"]\n')
    out = harness.same_as_local(SPLIT, remote="", RADIUM_SPLIT=str(split))
    assert out.splitlines()[:3] == [
        "wrote up to 39 39",
        "('# rows', [[0.0, 1.0], [2.0, 3.0]])",
        "next here: 4.0 5.0",
    ]
    assert "def write_rows(" in harness.log()  # it did run on the worker
