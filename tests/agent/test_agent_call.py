"""The agent's thin clients, bin/radium-agent-call (run as its callers run it, ``python -I -S``)
and its C twin (agent/agent_call.c, built here), against a stand-in start socket that
answers what each test wants: one suite, both clients."""

from __future__ import annotations

import contextlib
import importlib.machinery
import os
import re
import socket
import subprocess
import sys
import threading
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from radium import agentprotocol
from radium.agent import nativeclient
from radium.errors import BuildError

CLIENT = Path(__file__).resolve().parents[2] / "bin" / "radium-agent-call"
STATE = b'{"ociVersion": "1.0.2", "id": "c1", "pid": 1, "bundle": "/b"}'


class StandIn:
    """A unix socket that records each request (to the client's end of writing) and answers."""

    def __init__(self, path: Path, answer: bytes) -> None:
        self.path, self.answer = path, answer
        self.requests: list[bytes] = []
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(str(path))
        self.listener.listen(8)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                request = b""
                while chunk := conn.recv(65536):
                    request += chunk
                self.requests.append(request)
                conn.sendall(self.answer)

    def close(self) -> None:
        # A close alone does not wake the thread in accept(); a shutdown does (Linux).
        self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()


@contextlib.contextmanager
def stand_in(tmp_path: Path, answer: bytes) -> Iterator[StandIn]:
    server = StandIn(tmp_path / "start.sock", answer)
    try:
        yield server
    finally:
        server.close()


@contextlib.contextmanager
def published(config: Path, socket_path: Path) -> Iterator[None]:
    """The rendezvous link an agent running with ``config`` makes."""
    os.makedirs(agentprotocol.RENDEZVOUS_DIR, exist_ok=True)
    link = Path(agentprotocol.RENDEZVOUS_DIR) / agentprotocol.rendezvous_name(str(config))
    link.symlink_to(socket_path)
    try:
        yield
    finally:
        link.unlink()


@pytest.fixture(scope="module")
def native(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return nativeclient.build(tmp_path_factory.mktemp("native"), nativeclient.compiler())


@pytest.fixture(params=["python", "native"])
def client(request: pytest.FixtureRequest) -> list[str]:
    """The command line that runs one client, as the fronts and the agent's hooks run it."""
    if request.param == "native":
        return [str(request.getfixturevalue("native"))]
    return [sys.executable, "-I", "-S", str(CLIENT)]


def run(
    client: list[str], *args: str, stdin: bytes = b"", cwd: Path | None = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*client, *args], input=stdin, capture_output=True, cwd=cwd, timeout=30, env={}
    )


@pytest.mark.parametrize(
    "answer, status, stderr",
    [
        (agentprotocol.REPLY_OK, 0, b""),
        (agentprotocol.REPLY_PASS, 3, b""),
        (agentprotocol.REPLY_ERROR + b"no capacity for 3 whole GPUs (try later)\n", 1,
         b"radium-agent-call: no capacity for 3 whole GPUs (try later)\n"),
        (b"<html>\n", 1, b"radium-agent-call: node agent at "),
        (b"", 1, b"radium-agent-call: node agent at "),
    ],
)  # fmt: skip
def test_a_hook_sends_its_stage_and_state_and_exits_with_the_answer(
    client: list[str], tmp_path: Path, answer: bytes, status: int, stderr: bytes
) -> None:
    with stand_in(tmp_path, answer) as server:
        result = run(client, "--socket", str(server.path), "prestart", stdin=STATE)
    assert result.returncode == status
    assert result.stderr.startswith(stderr) and result.stdout == b""
    assert server.requests == [b"prestart\0" + STATE]


def test_create_finds_its_agent_by_config_and_sends_an_absolute_bundle(
    client: list[str], tmp_path: Path
) -> None:
    config = tmp_path / "radium%.toml"
    (tmp_path / "bundle").mkdir()
    with stand_in(tmp_path, agentprotocol.REPLY_OK) as server, published(config, server.path):
        result = run(client, "--config", str(config), "create", "bundle", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert server.requests == [
            b"\0".join([b"create", bytes(config), bytes(tmp_path / "bundle")])
        ]
        result = run(client, "--config", str(config), "delete", "c1")
        assert (
            result.returncode == 0 and server.requests[-1] == b"delete\0" + bytes(config) + b"\0c1"
        )


def test_create_without_an_agent_is_passed_to_the_full_path(
    client: list[str], tmp_path: Path
) -> None:
    config = tmp_path / "radium.toml"
    assert run(client, "--config", str(config), "create", "/b").returncode == 3  # no link
    assert run(client, "--config", "relative.toml", "create", "/b").returncode == 3
    with published(config, tmp_path / "gone.sock"):  # an agent that died
        result = run(client, "--config", str(config), "create", "/b")
    assert result.returncode == 3 and result.stderr == b""


def test_a_hook_whose_agent_is_gone_runs_the_full_hook_with_the_same_state(
    client: list[str], tmp_path: Path
) -> None:
    out = tmp_path / "state-seen"
    big = STATE[:-1] + b', "annotations": {"x": "' + b"y" * 200_000 + b'"}}'  # > a pipe buffer
    # The fallback as the agent writes it: the full hook command, then the stage ($0 here).
    fallback = ["/bin/sh", "-c", f'cat > {out}; echo "$0"', "prestart"]
    result = run(
        client, "--socket", str(tmp_path / "gone.sock"), "prestart", "--", *fallback, stdin=big
    )
    assert result.returncode == 0, result.stderr
    assert out.read_bytes() == big
    assert result.stdout == b"prestart\n"
    result = run(client, "--socket", str(tmp_path / "gone.sock"), "poststop", stdin=STATE)
    assert result.returncode == 1
    assert b"is 'radium agent' running?" in result.stderr


@pytest.mark.parametrize(
    "args",
    [[], ["--socket", "/s"], ["--config", "/c", "prestart", "x"],
     ["--socket", "/s", "create", "/b"], ["--config", "/c", "create"],
     ["--pool", "/p", "create", "/b"]],
)  # fmt: skip
def test_a_bad_command_line_is_one_line_and_status_2(client: list[str], args: list[str]) -> None:
    result = run(client, *args)
    assert result.returncode == 2 and result.stderr.count(b"\n") == 1


def test_the_client_spells_the_protocol_as_the_agent_does() -> None:
    """The client cannot import radium (it runs without site): its copies must stay equal."""
    loader = importlib.machinery.SourceFileLoader("radium_agent_call", str(CLIENT))
    client = types.ModuleType(loader.name)
    loader.exec_module(client)
    assert client.RENDEZVOUS_DIR == agentprotocol.RENDEZVOUS_DIR
    assert client.HOOK_STAGES == (agentprotocol.PRESTART, agentprotocol.POSTSTOP)
    assert client.RUNTIME_OPS == (agentprotocol.CREATE, agentprotocol.DELETE)
    assert client.MAX_STATE == agentprotocol.MAX_START_REQUEST
    for name in ("REPLY_OK", "REPLY_PASS", "REPLY_ERROR"):
        assert getattr(client, name) == getattr(agentprotocol, name)
    for path in ("/etc/radium/config.toml", "/a%2Fb/c%d.toml"):
        assert client.rendezvous_name(path) == agentprotocol.rendezvous_name(path)


def test_the_native_client_spells_the_protocol_as_the_agent_does() -> None:
    source = nativeclient.SOURCE.read_text()
    defined = dict(re.findall(r"^#define (\w+) (.+)$", source, re.MULTILINE))
    assert defined["RENDEZVOUS_DIR"] == f'"{agentprotocol.RENDEZVOUS_DIR}"'
    assert defined["MAX_STATE"] == "(1 << 20)" and agentprotocol.MAX_START_REQUEST == 1 << 20
    for name in ("REPLY_OK", "REPLY_PASS", "REPLY_ERROR"):
        assert (
            defined[name] == '"' + getattr(agentprotocol, name).decode().replace("\n", "\\n") + '"'
        )
    assert f'"{agentprotocol.PRESTART}"' in source and f'"{agentprotocol.POSTSTOP}"' in source
    assert f'"{agentprotocol.CREATE}"' in source and f'"{agentprotocol.DELETE}"' in source


def test_the_native_client_compiles_without_a_warning(tmp_path: Path) -> None:
    compiler = nativeclient.compiler()
    assert compiler is not None, "no C compiler: scripts/setup installs gcc"
    result = subprocess.run(
        [compiler, *nativeclient.CFLAGS, "-Werror", "-o", str(tmp_path / "c"),
         *map(str, nativeclient.SOURCES)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0 and result.stderr == "", result.stderr


def test_building_without_a_compiler_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="no C compiler") as caught:
        nativeclient.build(tmp_path, None)
    assert "install gcc" in caught.value.one_line()
    assert list(tmp_path.iterdir()) == []


def test_setup_builds_the_native_client_once_and_says_when_it_cannot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built, front = tmp_path / nativeclient.NAME, tmp_path / nativeclient.FRONT
    assert nativeclient.ensure(tmp_path) == f"{built}: built"
    assert nativeclient.installed(str(tmp_path)) == str(built)
    assert front.read_bytes() == built.read_bytes()  # the same program, by another name
    assert nativeclient.ensure(tmp_path) == f"{built}: present"  # a package's own is kept
    front.unlink()
    assert nativeclient.ensure(tmp_path) == f"{built}: built"  # both names, or build again
    built.unlink()
    front.unlink()
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert nativeclient.ensure(tmp_path).startswith(f"{built}: not built (no C compiler")
    assert list(tmp_path.iterdir()) == []


def test_a_client_built_from_another_source_is_rebuilt_or_else_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    older = tmp_path / nativeclient.NAME

    def an_older_installations_build() -> None:
        older.write_bytes(b"\x7fELF radium-agent-call source 0123456789abcdef")
        older.chmod(0o755)

    an_older_installations_build()
    assert nativeclient.installed(str(tmp_path)) is None  # the agent's hooks take Python's
    assert nativeclient.renew_stale(tmp_path) == (
        f"{older}: rebuilt (the one there was built from another version)"
    )
    assert nativeclient.installed(str(tmp_path)) == str(older)
    assert nativeclient.source_mark() in older.read_bytes()
    assert nativeclient.renew_stale(tmp_path) is None  # this source's: left alone
    an_older_installations_build()
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert nativeclient.renew_stale(tmp_path) == (
        f"{older}: not built (no C compiler (cc) to build the agent's native client; install gcc"
        " and run this again; until then starts use the Python client (a leased start costs"
        " 25 to 45 ms more)); the one built from another version is removed"
    )
    assert list(tmp_path.iterdir()) == []  # the fronts find none and take the Python client


def test_the_client_imports_nothing_but_the_interpreters_own(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-X", "importtime", str(CLIENT),
         "--socket", str(tmp_path / "s"), "poststop"],
        input=STATE, capture_output=True, timeout=30, env={},
    )  # fmt: skip
    imported = {
        line.split("|")[-1].strip() for line in result.stderr.decode().splitlines() if "|" in line
    }
    assert "site" not in imported and "socket" not in imported and "json" not in imported
    assert "_socket" in imported
