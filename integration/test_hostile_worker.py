"""A compromised worker against its client (issue 34, holes 3 and 8).

A fake worker, a real socket server speaking docs/data-plane.md with the interposer's own frame
and handshake code, serves a real client program: Debian's python3 (no numpy), the interposer
loaded as in a container, ``RADIUM_REMOTE=hostile``, dialling it with a lease credential. Asked
to run ``hostile.<probe>()``, the worker first writes a module into the client's working
directory through the client's own file service (what a compromised worker can do), then
answers with a value naming it: a module (``{"$": "m"}``), a record's or enum's class, or an
array (which an old client read with a planted ``numpy``); or it sends a 256 MiB array. The
planted module writes a marker file when it is imported.

Each probe runs twice: as the interposer is, where nothing planted is imported, the call fails
with a one-line DecodeError (or the value is rebuilt without the class) and the client's peak
RSS stays near the array's size; and with the old decoding put back in the client (modules
imported on the worker's word, arrays always nested lists), where the marker appears and the
peak is many times the array, so the probe would catch the hole. Either way the same
connection answers a legitimate call before and after.
"""

from __future__ import annotations

import itertools
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable, Dict, List, Sequence, Tuple

import pytest

from radium_interposer import handshake, records, wire
from radium_interposer.session import CALLBACK_BIT
from tests.interposer.harness import BARE_PYTHON, INTERPOSER, bare_python_has_no_numpy

CREDENTIAL = "hostile-worker-test-credential"
LIMITS = wire.Limits(max_meta=16 << 20)
#: The oversized array: 256 MiB of u1.
BIG = 256 << 20
ROOT = Path(__file__).resolve().parent.parent
Reply = Tuple[Dict[str, Any], List[Any]]


def _planted(name: str) -> bytes:
    """A module that leaves ``imported-<name>`` in the working directory when imported."""
    return (
        f"open('imported-{name}', 'w').close()\n"
        "import dataclasses, enum\n"
        "class Color(enum.Enum):\n    RED = 1\n"
        "@dataclasses.dataclass\nclass Config:\n    lr: float = 0.0\n"
    ).encode()


class FakeWorker:
    """One client connection, served as a compromised worker would."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reader: Any = sock.makefile("rb")
        self.ids = itertools.count(1)
        self.records = records.Reader()
        self.templates: Dict[int, Dict[str, Any]] = {}

    def serve(self) -> None:
        handshake.server(self.sock, lambda lease: CREDENTIAL, deadline=time.monotonic() + 10)
        self.sock.settimeout(120)
        while True:
            frame = wire.read(self.reader.readinto, LIMITS, batches=True)
            if frame is None or frame.type == wire.BYE:
                return
            if frame.body is not None:  # streamed records, and with a call id one that waits
                waiting = self.waiting(frame.body)
                frame.meta = waiting if frame.call_id else {}
            if frame.type == wire.CALL and frame.meta:  # a batch without a call id: no answer
                meta, buffers = self.answer(frame.meta)
                wire.send(self.sock, wire.RESULT, frame.call_id, meta, buffers)

    def waiting(self, body: bytes) -> Dict[str, Any]:
        """A binary batch's last call, named as a JSON call would name it (data-plane version
        3: the client sends a call that waits as a record)."""
        calls = []
        for record in self.records.parse(body):
            if record[0] == "D":
                self.templates[record[1]] = record[2]
            elif record[0] == "C":
                calls.append(record[1])
        return {"op": "call", "f": self.templates[calls[-1]]["f"]} if calls else {}

    def answer(self, meta: Dict[str, Any]) -> Reply:
        if meta.get("op") == "import":
            names = PROBES if meta.get("m") == "hostile" else {}
            return {"dir": dict.fromkeys(names, "f")}, []
        if meta.get("op") != "call":
            return {}, []
        probe = str(meta["f"].get("p", "")).rpartition(".")[2]
        return PROBES[probe](self)

    def plant(self, name: str) -> None:
        """Write ``<name>.py`` into the client's working directory with its file service."""
        file_id = self.ask({"op": "open", "path": f"{name}.py", "mode": "wb"})["v"]
        write = {"op": "file", "f": file_id, "m": "write", "a": [{"$": "b", "i": 0}]}
        self.ask(write, [_planted(name)])
        self.ask({"op": "file", "f": file_id, "m": "close", "a": []})

    def ask(self, meta: Dict[str, Any], buffers: Sequence[Any] = ()) -> Dict[str, Any]:
        call_id = CALLBACK_BIT | next(self.ids)
        wire.send(self.sock, wire.CALL, call_id, meta, buffers)
        answer = wire.read(self.reader.readinto, LIMITS)
        assert answer is not None and answer.type == wire.RESULT, answer
        return answer.meta


def _planting(
    name: str, value: Dict[str, Any], buffers: Sequence[Any] = ()
) -> Callable[..., Reply]:
    def probe(worker: FakeWorker) -> Reply:
        worker.plant(name)
        return {"v": value}, list(buffers)

    return probe


PROBES: Dict[str, Callable[[FakeWorker], Reply]] = {
    "answer": lambda worker: ({"v": 42}, []),
    "module_ref": _planting("pwnmod", {"$": "m", "n": "pwnmod"}),
    "enum_ref": _planting("pwnenum", {"$": "en", "t": "pwnenum.Color", "n": "RED"}),
    "record_ref": _planting(
        "pwnrec", {"$": "dc", "t": "pwnrec.Config", "f": {"$": "d", "k": ["lr"], "v": [0.5]}}
    ),
    "array_ref": _planting("numpy", {"$": "nd", "dt": "|u1", "sh": [4], "i": 0}, [b"\1\2\3\4"]),
    "big": lambda worker: ({"v": {"$": "nd", "dt": "|u1", "sh": [BIG], "i": 0}}, [bytes(BIG)]),
    # Legitimate references: a module the program imported, a submodule it remoted.
    "json_ref": lambda worker: ({"v": {"$": "m", "n": "json"}}, []),
    "sub_ref": lambda worker: ({"v": {"$": "m", "n": "hostile.sub"}}, []),
}


def serve(port_file: str) -> None:
    """The fake worker process: serve every connection; the port goes to ``port_file``."""
    listener = socket.create_server(("127.0.0.1", 0))
    Path(port_file + ".tmp").write_text(str(listener.getsockname()[1]))
    os.rename(port_file + ".tmp", port_file)
    while True:
        sock, _ = listener.accept()
        threading.Thread(target=_serve_closing, args=(sock,), daemon=True).start()


def _serve_closing(sock: socket.socket) -> None:
    with sock:
        try:
            FakeWorker(sock).serve()
        except (OSError, wire.ProtocolError) as exc:
            print(f"fake worker: {exc!r}", file=sys.stderr, flush=True)


#: The interposer's decoding before issue 34, put back in the client: modules imported by name,
#: records' classes and numpy imported as the worker names them, arrays always nested lists.
OLD_DECODING = """
import importlib
from radium_interposer import arrays, codec, proxy
_resolve = proxy._resolve
def _old_resolve(node):
    if node["$"] == "m":
        return importlib.import_module(str(node["n"]))
    return _resolve(node)
proxy.decode = lambda tree, buffers: codec.decode(tree, buffers, _old_resolve, codec.importing)
arrays.LIST_ITEMS = 1 << 62
"""
CLIENT = """
import json, os, resource, sys
if os.environ.get("HOSTILE_OLD"):
    exec(os.environ["HOSTILE_OLD"])
import hostile
import json as _json_imported  # the program's own import (json_ref names it)

def describe(value):
    if isinstance(value, memoryview):
        return ["memoryview", list(value.shape), value.format]
    if isinstance(value, list):
        return ["list", len(value)]
    if type(value).__name__ in ("module", "RemoteModule"):
        return [type(value).__name__, value.__name__]
    return [type(value).__module__ + "." + type(value).__qualname__, repr(value)[:80]]

out = {"before": hostile.answer()}
try:
    out["value"] = describe(getattr(hostile, sys.argv[1])())
except Exception as exc:
    out["error"] = type(exc).__name__ + ": " + str(exc)
out["after"] = hostile.answer()
out["maxrss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def fake_worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """The fake worker's port."""
    port_file = tmp_path_factory.mktemp("fake-worker") / "port"
    code = f"from integration.test_hostile_worker import serve; serve({str(port_file)!r})"
    process = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while not port_file.exists():
            assert process.poll() is None, "the fake worker exited"
            assert time.monotonic() < deadline, "the fake worker did not start in 60 s"
            time.sleep(0.05)
        yield int(port_file.read_text())
    finally:
        process.kill()
        process.wait()


def run_client(port: int, where: Path, probe: str, old: bool) -> Dict[str, Any]:
    """Run the client program in ``where`` (its working directory, where modules get planted)."""
    if not bare_python_has_no_numpy():
        pytest.fail(
            f"{BARE_PYTHON} without numpy is needed: apt-get install python3", pytrace=False
        )
    boot = where / "boot"
    boot.mkdir()
    (boot / "sitecustomize.py").write_text("import radium_interposer.boot\n")
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": f"{boot}{os.pathsep}{INTERPOSER}",
        "RADIUM_RUNTIME_DIR": str(where / "run"),
        "RADIUM_REMOTE": "hostile",
        "RADIUM_DP_DIRECT": f"127.0.0.1:{port}",
        "RADIUM_LEASE": "hostile",
        "RADIUM_LEASE_CREDENTIAL": CREDENTIAL,
        **({"HOSTILE_OLD": OLD_DECODING} if old else {}),
    }
    done = subprocess.run(
        [BARE_PYTHON, "-c", CLIENT, probe],
        env=env,
        cwd=where,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    result: Dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    assert result["before"] == result["after"] == 42, result  # the same connection still serves
    return result


REFUSED_MODULE = (
    "DecodeError: radium: the worker sent a reference to module 'pwnmod', which this program "
    "has neither imported nor remoted: refused (a worker may not make it import code)"
)


@pytest.mark.parametrize("old", [False, True], ids=["protected", "old-decoding"])
def test_a_module_the_worker_planted_and_named_never_runs(
    fake_worker: int, tmp_path: Path, old: bool
) -> None:
    result = run_client(fake_worker, tmp_path, "module_ref", old)
    assert (tmp_path / "pwnmod.py").exists()  # the file service wrote it: the attack's first half
    if old:
        assert (tmp_path / "imported-pwnmod").exists() and result["value"] == ["module", "pwnmod"]
    else:
        assert not (tmp_path / "imported-pwnmod").exists()
        assert result["error"] == REFUSED_MODULE


@pytest.mark.parametrize("old", [False, True], ids=["protected", "old-decoding"])
def test_a_class_the_worker_planted_and_named_never_runs(
    fake_worker: int, tmp_path: Path, old: bool
) -> None:
    results, imported = {}, []
    for probe, module in (("enum_ref", "pwnenum"), ("record_ref", "pwnrec")):
        where = tmp_path / probe
        where.mkdir()
        results[probe] = run_client(fake_worker, where, probe, old)
        imported.append((where / f"imported-{module}").exists())
    if old:
        assert imported == [True, True]
        assert results["enum_ref"]["value"] == ["pwnenum.Color", "<Color.RED: 1>"]
        assert results["record_ref"]["value"] == ["pwnrec.Config", "Config(lr=0.5)"]
    else:
        assert imported == [False, False]
        assert results["enum_ref"]["error"] == (
            "DecodeError: enum pwnenum.Color is not known on this side "
            "(its module is not imported here)"
        )
        # Its fields, without the class: what any side without the class makes of a record.
        assert results["record_ref"]["value"] == ["types.SimpleNamespace", "namespace(lr=0.5)"]


@pytest.mark.parametrize("old", [False, True], ids=["protected", "old-decoding"])
def test_an_array_does_not_import_a_planted_numpy(
    fake_worker: int, tmp_path: Path, old: bool
) -> None:
    result = run_client(fake_worker, tmp_path, "array_ref", old)
    assert (tmp_path / "numpy.py").exists()
    if old:
        assert (tmp_path / "imported-numpy").exists()  # (then it fails: it is no numpy)
        assert result["error"].startswith("AttributeError: module 'numpy' has no attribute")
    else:
        assert not (tmp_path / "imported-numpy").exists()
        assert result["value"] == ["list", 4]


def test_modules_the_program_has_or_remoted_still_arrive(fake_worker: int, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert run_client(fake_worker, tmp_path / "a", "json_ref", False)["value"] == ["module", "json"]
    remoted = run_client(fake_worker, tmp_path / "b", "sub_ref", False)["value"]
    assert remoted == ["RemoteModule", "hostile.sub"]


@pytest.mark.parametrize("old", [False, True], ids=["protected", "old-decoding"])
def test_an_oversized_array_stays_near_its_size(
    fake_worker: int, tmp_path: Path, old: bool
) -> None:
    result = run_client(fake_worker, tmp_path, "big", old)
    peak = result["maxrss_kib"] << 10
    print(f"\n{BIG >> 20} MiB of u1, {'old decoding' if old else 'protected'}: "
          f"client peak RSS {peak / (1 << 20):.0f} MiB")  # fmt: skip
    if old:
        assert result["value"] == ["list", BIG]
        assert peak > 4 * BIG
    else:
        assert result["value"] == ["memoryview", [BIG], "B"]
        assert peak < BIG + (96 << 20)  # the received bytes, plus the interpreter
