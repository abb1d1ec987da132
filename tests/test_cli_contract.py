"""The ``radium`` command line's contract, through the real entry point as users run it.

Every subcommand has ``--help`` with a description; every user error exits non-zero with one
line (argparse's usage aside) and no traceback; a closed stdout ends a command quietly, as it
ends ``ls | head``. The commands that read the pool read a fake one: a gRPC server in this
process answering with fixed data. That two ``radium up`` in other state directories run side
by side, each serving its ``radium exec``, needs root and real services: it is in
integration/test_up.py.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from radium.cli import EXIT_PIPE_CLOSED, build_parser, subcommands
from radium.proto import pool_pb2 as pb
from radium.proto import pool_pb2_grpc as pb_grpc
from tests.dra.test_slices import validate
from tests.ports import free_port

RADIUM = str(Path(sys.executable).parent / "radium")
#: Leases the fake pool lists: their table is far more than a pipe holds (64 KiB), so the
#: reader always goes away while ``radium leases`` still writes.
MANY_LEASES = 3000


def run(*argv: str, env: dict[str, str], **options: object) -> subprocess.CompletedProcess[str]:
    """``radium ARGV`` as a user runs it; its output captured unless ``options`` say more."""
    given: dict[str, object] = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **options}
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        [RADIUM, *argv], env=env, text=True, timeout=60, **given
    )


class Pool(pb_grpc.PoolServicer):
    """A pool of one acceptor, one device and :data:`MANY_LEASES` ended leases."""

    def ListLeases(self, request: pb.ListLeasesRequest, context: object) -> pb.ListLeasesResponse:
        leases = [
            pb.Lease(id=f"l-{n:016x}", acceptor="acc", device_ids=["cpu0"], holder=f"node/c{n}",
                     state="released", fraction=1.0)
            for n in range(MANY_LEASES)
        ]  # fmt: skip
        gpu = pb.Lease(id="l-gpu", acceptor="acc", device_ids=["0"], holder="node/g",
                       state="active", fraction=0.5, memory_mib=40960, rss_bytes=300 << 20,
                       gpu_memory_bytes=3 << 30, gpu_sm_percent=61.6)  # fmt: skip
        return pb.ListLeasesResponse(leases=leases if request.all else [gpu])

    def Status(self, request: pb.StatusRequest, context: object) -> pb.StatusResponse:
        return pb.StatusResponse(
            version="0.1.0",
            active_leases=1,
            acceptors=[pb.AcceptorStatus(name="acc", data_address="127.0.0.1:1", up=True)],
            devices=[pb.DeviceStatus(acceptor="acc", device=pb.Device(id="cpu0"), up=True)],
        )


@pytest.fixture(scope="module")
def fake_pool() -> Iterator[str]:
    server = grpc.server(futures.ThreadPoolExecutor(4))
    pb_grpc.add_PoolServicer_to_server(Pool(), server)  # type: ignore[no-untyped-call]
    address = f"127.0.0.1:{free_port()}"
    server.add_insecure_port(address)
    server.start()
    try:
        yield address
    finally:
        server.stop(None)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private installation: no agent is started, nothing under /run/radium is touched."""
    root = tmp_path_factory.mktemp("cli")
    (root / "empty").mkdir()
    subprocess.run([RADIUM, "bundles", "build", "--out", str(root / "bundles")], check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    return root


def environ(home: Path, pool: str) -> dict[str, str]:
    config = home / f"config-{pool.rpartition(':')[2]}.toml"
    config.write_text(
        f'[bundles]\ndir = "{home / "bundles"}"\n'
        f'[hook]\nstate_dir = "{home / "state"}"\nlog_file = "{home / "hook.log"}"\n'
        f'[agent]\nsocket = "{home / "agent.sock"}"\nstate_file = "{home / "agent.json"}"\n'
        f'log_file = "{home / "agent.log"}"\nautostart = false\n'
        f'[client]\npool = "{pool}"\ntoken = "t"\ntimeout = 5\n'
    )
    return {"PATH": os.environ["PATH"], "RADIUM_CONFIG": str(config)}


@pytest.fixture(scope="module")
def env(home: Path, fake_pool: str) -> dict[str, str]:
    return environ(home, fake_pool)


# -- help ---------------------------------------------------------------------------------------

COMMANDS = [words for words, _, _ in subcommands(build_parser())]


def test_the_tree_is_walked() -> None:
    assert {("leases",), ("images", "ls"), ("run",), ("agent",), ("certs", "issue")} <= set(
        COMMANDS
    )


@pytest.mark.parametrize("words", [(), *COMMANDS], ids=lambda w: " ".join(w) or "radium")
def test_every_subcommand_has_help_with_a_description(
    words: tuple[str, ...], env: dict[str, str]
) -> None:
    done = run(*words, "--help", env=env)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout.startswith(" ".join(("usage: radium", *words)))
    parsers = {words: parser for words, parser, _ in subcommands(build_parser())}
    parser = parsers.get(words, build_parser())
    assert parser.description
    shown = " ".join(done.stdout.split())
    assert " ".join(parser.description.split()) in shown
    if words == ("run",):  # its own help (docker's options pass through its parser)
        assert "--gpus N" in shown and "--memory MiB" in shown and "--wait S" in shown


def test_every_argument_and_subcommand_says_what_it_is() -> None:
    missing = []
    for words, parser, listed_as in [((), build_parser(), "radium"), *subcommands(build_parser())]:
        if not listed_as:
            missing.append(" ".join(words))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction) or action.help:
                continue
            missing.append(f"{' '.join(words)} {'/'.join(action.option_strings) or action.dest}")
    assert missing == []


def test_exec_has_the_request_options_run_has() -> None:
    options = dict((w, p) for w, p, _ in subcommands(build_parser()))[
        ("exec",)
    ]._option_string_actions
    for option in ("--gpus", "--fraction", "--memory", "--queue", "--priority", "--wait",
                   "--remote", "--split", "--worker"):  # fmt: skip
        assert option in options


# -- user errors --------------------------------------------------------------------------------

EXEC = ("exec", "--remote", "numpy")
#: (arguments, exit status, the one line, whose usage argparse prints before it or None)
USER_ERRORS = [
    (("bogus",), 2, "radium: error: argument COMMAND: invalid choice: 'bogus'", ""),
    (("leases", "--bogus"), 2, "radium leases: error: unrecognized arguments: --bogus", "leases"),
    (("images", "ls", "--bogus"), 2, "radium images ls: error: unrecognized arguments: --bogus",
     "images ls"),
    (("queues", "add"), 2, "radium queues add: error: the following arguments are required: name",
     "queues add"),
    (("top", "--interval", "0"), 2, "between 0.1 and 3600 seconds, got 0", "top"),
    (("setup", "nerdctl"), 2, "argument engine: invalid choice: 'nerdctl'", "setup"),
    ((*EXEC, "--priority", "urgent", "--", "true"), 2, "invalid choice: 'urgent'", "exec"),
    ((*EXEC, "--gpus", "-1", "--", "true"), 1,
     "radium: --gpus must be a whole number of GPUs (0 or more), got '-1'; see radium exec -h",
     None),
    ((*EXEC, "--gpus", "two", "--", "true"), 1, "radium: --gpus must be a whole number", None),
    ((*EXEC, "--fraction", "0", "--", "true"), 1,
     "radium: --fraction must be a GPU fraction in (0, 1], got '0'; see radium exec -h", None),
    ((*EXEC, "--fraction", "2", "--", "true"), 1, "radium: --fraction must be a GPU fraction",
     None),
    ((*EXEC, "--memory", "0", "--", "true"), 1, "radium: --memory must be GPU memory in MiB",
     None),
    ((*EXEC, "--wait", "4000", "--", "true"), 1, "radium: --wait must be seconds", None),
    ((*EXEC, "--fraction", "0.5", "--memory", "512", "--", "true"), 1,
     "radium: --fraction and --memory exclude each other; see radium exec -h", None),
    (EXEC, 1, "radium: radium exec needs a command", None),
    (("exec", "--", "true"), 1, "radium: nothing to remote; add --remote MODULE", None),
    (("run",), 1, "radium: an image is missing; see radium run -h", None),
    (("run", "--gpus"), 1, "radium: --gpus needs a value; see radium run -h", None),
    (("run", "--gpus", "-1", "img"), 1, "radium: --gpus must be a whole number of GPUs", None),
    (("run", "--fraction", "0", "img"), 1,
     "radium: --fraction must be a GPU fraction in (0, 1], got '0'; see radium run -h", None),
    (("certs", "issue", "pool"), 2, "the following arguments are required: name", "certs issue"),
]  # fmt: skip


def error_lines(stderr: str) -> tuple[str, list[str]]:
    """(argparse's usage, if any, as one string; the other lines)."""
    usage: list[str] = []
    rest: list[str] = []
    for line in stderr.splitlines():
        if line.startswith("usage: ") or (usage and not rest and line.startswith(" ")):
            usage.append(line.strip())
        else:
            rest.append(line)
    return " ".join(usage), rest


@pytest.mark.parametrize(
    "argv, status, line, usage_of", USER_ERRORS, ids=[" ".join(e[0]) for e in USER_ERRORS]
)
def test_a_user_error_is_one_line_and_no_traceback(
    argv: tuple[str, ...],
    status: int,
    line: str,
    usage_of: str | None,
    env: dict[str, str],
    home: Path,
) -> None:
    done = run(*argv, env=env)
    usage, lines = error_lines(done.stderr)
    assert (done.returncode, done.stdout) == (status, ""), done.stderr
    assert "Traceback" not in done.stderr
    assert len(lines) == 1 and line in lines[0], done.stderr
    if usage_of is None:
        assert usage == ""
    else:
        assert usage.startswith(" ".join(("usage: radium", usage_of)).strip() + " "), usage
    assert not (home / "agent.sock").exists()  # refused before any agent was asked


def test_an_unreachable_pool_is_one_line(home: Path) -> None:
    unreachable = environ(home, f"127.0.0.1:{free_port()}")
    for argv in (("gpus",), ("leases", "--all"), ("status", "--json"), ("dra", "slices")):
        done = run(*argv, env=unreachable)
        assert done.returncode == 1 and done.stdout == ""
        assert done.stderr.startswith("radium: pool at 127.0.0.1:") and "unavailable" in done.stderr
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_status_counts_in_words(env: dict[str, str]) -> None:
    done = run("status", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "pool 0.1.0: 1 acceptor (1 up), 1 device, 1 active lease"


# -- a closed stdout ------------------------------------------------------------------------------


def into_closed_pipe(
    argv: tuple[str, ...], env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """Run with stdout a pipe whose reader is already gone: the first write fails."""
    read, write = os.pipe()
    os.close(read)
    try:
        return run(*argv, env=env, stdout=write)
    finally:
        os.close(write)


@pytest.mark.parametrize(
    "argv",
    [("--help",), ("leases", "--help"), ("run", "--help"), ("leases", "--all"), ("status",),
     ("leases", "--all", "--json")],
    ids=" ".join,
)  # fmt: skip
def test_a_closed_stdout_ends_a_command_quietly(argv: tuple[str, ...], env: dict[str, str]) -> None:
    for _ in range(3):
        done = into_closed_pipe(argv, env)
        assert (done.returncode, done.stderr) == (EXIT_PIPE_CLOSED, "")


def test_dra_slices_prints_the_pool_s_devices_as_valid_resource_slices(
    env: dict[str, str], tmp_path: Path
) -> None:
    done = run("dra", "slices", "--pool", "team-a", "--generation", "3", env=env)
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert listed["kind"] == "List" and len(listed["items"]) == 1
    spec = listed["items"][0]["spec"]
    assert spec["pool"] == {"name": "team-a", "generation": 3, "resourceSliceCount": 1}
    gpus = json.loads(run("gpus", "--json", env=env).stdout)
    assert [d["attributes"]["acceptor"]["string"] for d in spec["devices"]] == [
        g["acceptor"] for g in gpus
    ]
    validate(listed["items"], "1.34.0", tmp_path)


def test_leases_shows_each_lease_s_gpu_use(env: dict[str, str]) -> None:
    done = run("leases", env=env)
    assert done.returncode == 0 and done.stderr == ""
    header, row = done.stdout.splitlines()[:2]
    shown = dict(zip(header.replace("RSS MiB", "RSS").replace("GPU MiB", "GPU").split(),
                     row.split()))  # fmt: skip
    assert (shown["RSS"], shown["GPU"], shown["SM"]) == ("300", "3072", "62%")


def test_leases_into_head_ends_quietly(env: dict[str, str]) -> None:
    """``radium leases --all | head -1``: head exits while radium still writes, every time."""
    for _ in range(5):
        radium = subprocess.Popen(
            [RADIUM, "leases", "--all"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        head = subprocess.Popen(["head", "-1"], stdin=radium.stdout, stdout=subprocess.PIPE)
        assert radium.stdout is not None and radium.stderr is not None
        radium.stdout.close()  # head holds the only reader
        first, _ = head.communicate(timeout=60)
        assert first.split()[:2] == [b"LEASE", b"STATE"]
        assert radium.stderr.read() == b""
        assert radium.wait(timeout=60) == EXIT_PIPE_CLOSED
        radium.stderr.close()


def test_a_broken_pipe_that_is_not_stdout_still_shows(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only a closed stdout is quiet: a broken socket elsewhere is a bug to see."""
    from radium import cli
    from radium.commands import inspect

    def broken(args: argparse.Namespace) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(inspect, "_status", broken)
    with pytest.raises(BrokenPipeError):
        cli.main(["status"])


# -- radium up side by side ---------------------------------------------------------------------
