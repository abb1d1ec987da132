"""The ``find`` operation (docs/data-plane.md): whether the worker can import a module, and the
closest names it can; asked of a real worker process through a stand-in agent, and of a hostile
worker whose answer must not reach the user's terminal as it is."""

from __future__ import annotations

import contextlib
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from radium_interposer import names, wire
from radium_interposer.errors import WorkerGone
from tests.interposer.harness import WorkerHarness


def test_a_real_worker_names_the_modules_it_cannot_import_and_the_closest(
    harness: WorkerHarness,
) -> None:
    asked = ["numpy", "nmupy", "numpy.linalg", "numpy.linalgg", "os.path", "jsn"]
    missing = names.ask(harness.socket_path, asked, timeout=60)
    assert missing is not None
    closest = {module: near[0] for module, near in missing.items()}
    assert closest == {"nmupy": "numpy", "numpy.linalgg": "numpy.linalg", "jsn": "json"}
    assert all(len(near) <= names.MAX_NEAR for near in missing.values())


def test_a_module_with_nothing_close_gets_no_guess() -> None:
    assert names.find("zzqqxxyyww") == {"have": False, "near": []}


@pytest.mark.parametrize("name", ["1bad", "numpy.", "", "a-b", "x" * 300, 7, None])
def test_find_refuses_what_is_not_a_module_name(name: Any) -> None:
    with pytest.raises(ValueError, match="is not a module name"):
        names.find(name)


class FakeWorker:
    """An agent socket whose worker answers every call with ``answer`` (a hostile worker)."""

    def __init__(self, root: Path, answer: tuple[int, dict[str, Any]]) -> None:
        self.path = str(root / "dp.sock")
        self.answer = answer
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(self.path)
        self.listener.listen(4)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        agent_side, _ = self.listener.accept()
        ours, theirs = socket.socketpair()
        with agent_side, theirs:
            agent_side.recv(1024)
            wire.send_fd(agent_side, b'{"ok": true, "v": %d}\n' % wire.VERSION, theirs.fileno())
        with ours, contextlib.suppress(OSError):  # the client may hang up mid-answer
            while (frame := wire.read(ours.recv_into)) is not None:
                wire.send(ours, self.answer[0], frame.call_id, self.answer[1])


def test_a_hostile_worker_s_guesses_are_kept_only_as_module_names(tmp_path: Path) -> None:
    near = ["\x1b[2J\x1b[31mrm -rf /", "numpy", "a" * 300, 5, "ok.name", "more", "extra"]
    worker = FakeWorker(tmp_path, (wire.RESULT, {"have": "yes", "near": near}))
    assert names.ask(worker.path, ["nmupy"], timeout=10) == {"nmupy": ["numpy", "ok.name", "more"]}


def test_an_oversized_answer_is_refused_unread(tmp_path: Path) -> None:
    worker = FakeWorker(tmp_path, (wire.RESULT, {"have": False, "near": ["n" * (1 << 17)]}))
    with pytest.raises(WorkerGone, match="exceeds the limit"):
        names.ask(worker.path, ["nmupy"], timeout=10)


def test_an_older_worker_without_find_is_not_checked(tmp_path: Path) -> None:
    answer = {"error": "ValueError: unknown operation 'find'", "type": "ValueError"}
    worker = FakeWorker(tmp_path, (wire.ERROR, answer))
    assert names.ask(worker.path, ["nmupy"], timeout=10) is None


def test_no_agent_is_worker_gone(tmp_path: Path) -> None:
    with pytest.raises(WorkerGone, match="cannot reach the node agent"):
        names.ask(str(tmp_path / "dp.sock"), ["numpy"], timeout=10)
