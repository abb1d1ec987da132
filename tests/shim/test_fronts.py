"""The fronts of radium-runtime and the containerd shim (docs/runtime-front.md): the shell
scripts, and the same rule in C (radium-front-native) that they exec where it was built.

Each case runs the real front with /bin/sh in a directory that also holds a stand-in for its
Python program, and a PATH whose low-level runtime is a stand-in too: both print who they are
and their argv. The front must exec the low-level program itself only where the Python program
would have passed the call through untouched, and hand everything else to Python, argv intact.
The decision table runs twice: the shell alone, then with the native front beside it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from radium import agentprotocol
from radium.agent import nativeclient
from radium.shim import argv as runc_argv
from radium.shim import containerd
from radium.shim import request as request_module
from tests.agent.test_agent_call import published
from tests.agent.test_agent_call import stand_in as agent_stand_in

BIN = Path(__file__).resolve().parents[2] / "bin"
# Says "radium", as containerd namespaces, data roots and image names do, but asks nothing.
PLAIN = {
    "process": {"env": ["PATH=/usr/bin", "HOME=/root", "IMAGE=radium/app"]},
    "annotations": {"a": "b", "radium.io-like": "x"},
    "linux": {"cgroupsPath": "/radium-test/c1"},
}
ASKS_BY_ENV = {"process": {"env": ["PATH=/usr/bin", "RADIUM_GPUS=1"]}}
ASKS_BY_ANNOTATION = {"process": {"env": []}, "annotations": {"radium.io/gpus": "1"}}
SPECS = [PLAIN, ASKS_BY_ENV, ASKS_BY_ANNOTATION]


def stand_in(path: Path, name: str) -> None:
    path.write_text(f'#!/bin/sh\necho "{name}" "$@"\n')
    path.chmod(0o755)


@pytest.fixture(scope="module")
def native_front(tmp_path_factory: pytest.TempPathFactory) -> Path:
    built = nativeclient.build(tmp_path_factory.mktemp("native"), nativeclient.compiler())
    return built.with_name(nativeclient.FRONT)


@pytest.fixture(params=["sh", "native"])
def place(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """bin/ with both fronts and their Python stand-ins (and, for "native", the native front),
    low/ with the low-level stand-ins."""
    bin_dir, low = tmp_path / "bin", tmp_path / "low"
    bin_dir.mkdir()
    low.mkdir()
    for front in ("radium-runtime", "containerd-shim-radium-v2"):
        shutil.copy(BIN / front, bin_dir / front)
        stand_in(bin_dir / f"{front}-full", "PYTHON")
    if request.param == "native":
        shutil.copy(request.getfixturevalue("native_front"), bin_dir / nativeclient.FRONT)
    for name in ("runc", "crun", "containerd-shim-runc-v2"):
        stand_in(low / name, name)
    (tmp_path / "bundle").mkdir()
    return tmp_path


#: For the tests of the shell front's agent client (the native front calls the agent itself).
SHELL_ONLY = pytest.mark.parametrize("place", ["sh"], indirect=True)


def run_front(
    place: Path,
    front: str,
    args: list[str],
    config: str | None = None,
    path: str = "",
    debug: bool = False,
) -> list[str]:
    """The front's output: who ran (PYTHON or a low-level program) and the argv it got."""
    env = {"PATH": path or f"{place / 'low'}:/usr/bin:/bin", "RADIUM_CONFIG": str(place / "c.toml")}
    if debug:
        env["RADIUM_DEBUG"] = "1"
    if config is not None:
        (place / "c.toml").write_text(config)
    done = subprocess.run(
        [str(place / "bin" / front), *args],
        cwd=place / "bundle", env=env, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 0 and not done.stderr, done
    return done.stdout.split()


def spec(place: Path, content: object) -> None:
    (place / "bundle" / "config.json").write_text(json.dumps(content))


def in_bundle(place: Path, content: object, call: list[str]) -> list[str]:
    """Write the spec; the call's arguments with ``{b}`` naming its bundle."""
    spec(place, content)
    return [arg.replace("{b}", str(place / "bundle")) for arg in call]


def python_passes_runc_through(place: Path, args: list[str]) -> bool:
    """What the Python wrapper decides: no spec to edit, or a spec that asks nothing."""
    parsed = runc_argv.parse(args, cwd=str(place / "bundle"))
    if not parsed.edits_spec:
        return True
    config = Path(parsed.bundle or ".") / "config.json"
    return (
        request_module.from_spec(json.loads(config.read_text()), request_module.NOTHING_SET) is None
    )


RUNC_CALLS = [
    ["create", "--bundle", "{b}", "id"],
    ["--root", "/r", "--log", "/l", "--log-format", "json", "create", "-b", "{b}", "id"],
    ["--root=/r", "--systemd-cgroup", "run", "--pid-file", "/p", "--bundle={b}", "-d", "id"],
    ["create", "--console-socket", "/s", "--preserve-fds", "2", "id"],  # bundle: the cwd
    ["--debug", "start", "id"],
    ["delete", "--force", "id"],
    ["state", "id"],
]


@pytest.mark.parametrize("content", SPECS)
@pytest.mark.parametrize("call", RUNC_CALLS)
def test_the_runtime_front_passes_through_only_what_python_would(
    place: Path, content: object, call: list[str]
) -> None:
    args = in_bundle(place, content, call)
    expected = "runc" if python_passes_runc_through(place, args) else "PYTHON"
    assert run_front(place, "radium-runtime", args) == [expected, *args]


@pytest.mark.parametrize(
    "args",
    [
        ["--version"],  # a flag the front does not know
        ["--", "create", "id"],
        [],
        ["create", "---bundle", "/x", "id"],
    ],
)
def test_the_runtime_front_asks_python_what_it_does_not_know(place: Path, args: list[str]) -> None:
    spec(place, PLAIN)
    assert run_front(place, "radium-runtime", args) == ["PYTHON", *args]


def test_the_runtime_front_asks_python_when_the_spec_is_unreadable(place: Path) -> None:
    assert run_front(place, "radium-runtime", ["create", "id"]) == ["PYTHON", "create", "id"]


def test_a_config_naming_runtimes_goes_to_python_and_comments_do_not(place: Path) -> None:
    spec(place, PLAIN)
    commented = '[runtime]\n# runtimes = ["crun"]\nlog_file = "/x"\n'
    assert run_front(place, "radium-runtime", ["start", "i"], commented)[0] == "runc"
    named = '[runtime]\nruntimes = ["crun"]\n'
    assert run_front(place, "radium-runtime", ["start", "i"], named)[0] == "PYTHON"
    inline = 'runtime = { runtimes = ["crun"] }\n'
    assert run_front(place, "radium-runtime", ["start", "i"], inline)[0] == "PYTHON"


def test_the_runtime_front_takes_crun_when_there_is_no_runc_and_never_itself(
    place: Path,
) -> None:
    tools = place / "tools"  # what the front runs, without the host's own runc and crun
    tools.mkdir()
    for tool in ("grep", "readlink"):
        os.symlink(shutil.which(tool) or tool, tools / tool)
    path = f"{place / 'low'}:{tools}"
    (place / "low" / "runc").unlink()
    assert run_front(place, "radium-runtime", ["start", "i"], path=path)[0] == "crun"
    (place / "low" / "crun").unlink()
    # runc on PATH is the front itself (a link to it): Python says no runtime is installed.
    os.symlink(place / "bin" / "radium-runtime", place / "low" / "runc")
    assert run_front(place, "radium-runtime", ["start", "i"], path=path)[0] == "PYTHON"


SHIM_CALLS = [
    ["-namespace", "k8s.io", "-address", "/run/c.sock", "-publish-binary", "/c", "-id", "x",
     "start"],
    ["-namespace=default", "-id=x", "-bundle", "{b}", "delete"],
    ["--debug", "-id", "x", "start"],
]  # fmt: skip


@pytest.mark.parametrize("content", SPECS)
@pytest.mark.parametrize("call", SHIM_CALLS)
def test_the_shim_front_passes_through_only_what_python_would(
    place: Path, content: object, call: list[str]
) -> None:
    args = in_bundle(place, content, call)
    action, flags = containerd.parse(args)
    bundle = Path(flags.get("bundle") or place / "bundle")
    asks = request_module.from_spec(
        json.loads((bundle / "config.json").read_text()), request_module.NOTHING_SET
    )
    assert action in ("start", "delete")
    expected = "containerd-shim-runc-v2" if asks is None else "PYTHON"
    assert run_front(place, "containerd-shim-radium-v2", args) == [expected, *args]


@pytest.mark.parametrize("args", [["-v"], ["-id", "x"], ["-id", "x", "-unknown", "start"]])
def test_the_shim_front_asks_python_what_it_does_not_know(place: Path, args: list[str]) -> None:
    spec(place, PLAIN)
    assert run_front(place, "containerd-shim-radium-v2", args) == ["PYTHON", *args]


def test_the_shim_front_asks_python_to_delete_a_bundle_without_a_spec(place: Path) -> None:
    args = ["-id", "x", "delete"]
    assert run_front(place, "containerd-shim-radium-v2", args) == ["PYTHON", *args]


def test_a_config_naming_the_runc_shim_goes_to_python(place: Path) -> None:
    spec(place, PLAIN)
    config = '[shim]\nrunc_shim = "/opt/shim"\n'
    assert run_front(place, "containerd-shim-radium-v2", ["start"], config) == ["PYTHON", "start"]


def test_a_front_finds_its_python_program_through_a_link(place: Path, tmp_path: Path) -> None:
    """/usr/bin/radium-runtime is a link into /opt/radium/bin in the Debian package."""
    spec(place, ASKS_BY_ENV)
    linked = tmp_path / "usr-bin"
    linked.mkdir()
    os.symlink(place / "bin" / "radium-runtime", linked / "radium-runtime")
    done = subprocess.run(
        [str(linked / "radium-runtime"), "create", "id"],
        cwd=place / "bundle", env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
        timeout=30,
    )  # fmt: skip
    assert done.stdout.split() == ["PYTHON", "create", "id"], done


def agent_first(place: Path, status: int) -> Path:
    """Make the Python programs' interpreter a stand-in: called as ``-I -S radium-agent-call``
    it records its argv in ``agent-calls`` and exits ``status`` (the agent's answer); called as
    the interpreter of a -full program it says PYTHON."""
    calls = place / "agent-calls"
    python = place / "python"
    python.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = -I ]; then echo "$@" >> {calls}; exit {status}; fi\n'
        'shift; echo PYTHON "$@"\n'
    )
    python.chmod(0o755)
    for front in ("radium-runtime", "containerd-shim-radium-v2"):
        (place / "bin" / f"{front}-full").write_text(f"#!{python}\n")
    return calls


@SHELL_ONLY
@pytest.mark.parametrize("status, who", [(0, "runc"), (3, "PYTHON"), (1, "PYTHON")])
def test_the_runtime_front_asks_the_agent_first_for_a_radium_create(
    place: Path, status: int, who: str
) -> None:
    calls = agent_first(place, status)
    spec(place, ASKS_BY_ENV)
    args = ["--root", "/r", "create", "--bundle", str(place / "bundle"), "id"]
    assert run_front(place, "radium-runtime", args) == [who, *args]
    client = place / "bin" / "radium-agent-call"
    config = place / "c.toml"
    assert calls.read_text().split() == [
        "-I", "-S", str(client), "--config", str(config), "create", str(place / "bundle"),
    ]  # fmt: skip


@SHELL_ONLY
@pytest.mark.parametrize(
    "call, agent_args, low",
    [
        (["-id", "x", "start"], ["create", "."], "containerd-shim-runc-v2"),
        (["-id=x", "-bundle", "{b}", "delete"], ["delete", "x"], "containerd-shim-runc-v2"),
    ],
)
def test_the_shim_front_asks_the_agent_first_for_a_radium_start_or_delete(
    place: Path, call: list[str], agent_args: list[str], low: str
) -> None:
    calls = agent_first(place, 0)
    args = in_bundle(place, ASKS_BY_ANNOTATION, call)
    assert run_front(place, "containerd-shim-radium-v2", args) == [low, *args]
    assert calls.read_text().split()[-len(agent_args) :] == agent_args


@SHELL_ONLY
def test_the_agent_is_not_asked_when_python_must_decide(place: Path) -> None:
    calls = agent_first(place, 0)
    spec(place, PLAIN)  # asks nothing: runc at once
    assert run_front(place, "radium-runtime", ["create", "id"])[0] == "runc"
    spec(place, ASKS_BY_ENV)  # configured runtimes: only Python reads them
    named = '[runtime]\nruntimes = ["crun"]\n'
    assert run_front(place, "radium-runtime", ["create", "id"], named)[0] == "PYTHON"
    (place / "c.toml").unlink()
    assert run_front(place, "radium-runtime", ["create", "id"], debug=True)[0] == "PYTHON"
    assert not calls.exists()


@SHELL_ONLY
@pytest.mark.parametrize("status, runtime, shim", [
    (0, "runc", "containerd-shim-runc-v2"), (3, "PYTHON", "PYTHON"), (1, "PYTHON", "PYTHON"),
])  # fmt: skip
def test_the_fronts_ask_the_native_client_where_it_was_built(
    place: Path, status: int, runtime: str, shim: str
) -> None:
    python_calls = agent_first(place, 0)  # the Python client would say "ok": it must not run
    native_calls = place / "native-calls"
    native = place / "bin" / "radium-agent-call-native"
    native.write_text(f'#!/bin/sh\necho "$@" >> {native_calls}; exit {status}\n')
    native.chmod(0o755)
    spec(place, ASKS_BY_ENV)
    args = ["create", "--bundle", str(place / "bundle"), "id"]
    assert run_front(place, "radium-runtime", args) == [runtime, *args]
    args = ["-id", "x", "start"]
    assert run_front(place, "containerd-shim-radium-v2", args) == [shim, *args]
    config = str(place / "c.toml")
    assert native_calls.read_text().splitlines() == [
        f"--config {config} create {place / 'bundle'}", f"--config {config} create .",
    ]  # fmt: skip
    assert not python_calls.exists()


NATIVE_ONLY = pytest.mark.parametrize("place", ["native"], indirect=True)


@NATIVE_ONLY
@pytest.mark.parametrize("answer, who", [
    (agentprotocol.REPLY_OK, "runc"), (agentprotocol.REPLY_PASS, "PYTHON"),
    (agentprotocol.REPLY_ERROR + b"no capacity\n", "PYTHON"), (b"<html>\n", "PYTHON"),
])  # fmt: skip
def test_the_native_front_asks_the_agent_itself_and_says_nothing(
    place: Path, answer: bytes, who: str
) -> None:
    spec(place, ASKS_BY_ENV)
    config = place / "c.toml"
    config.write_text("")
    args = ["--root", "/r", "create", "--bundle", str(place / "bundle"), "id"]
    with agent_stand_in(place, answer) as agent, published(config, agent.path):
        assert run_front(place, "radium-runtime", args) == [who, *args]  # and nothing on stderr
        assert run_front(place, "containerd-shim-radium-v2", ["-id", "x", "delete"])[0] == (
            "containerd-shim-runc-v2" if who == "runc" else "PYTHON"
        )
    assert agent.requests == [
        b"create\0" + f"{config}\0{place / 'bundle'}".encode(),
        f"delete\0{config}\0x".encode(),
    ]


@NATIVE_ONLY
def test_the_native_front_leaves_the_agent_alone_when_python_must_decide(place: Path) -> None:
    spec(place, ASKS_BY_ENV)
    config = place / "c.toml"
    config.write_text('[runtime]\nruntimes = ["crun"]\n')
    with agent_stand_in(place, agentprotocol.REPLY_OK) as agent, published(config, agent.path):
        assert run_front(place, "radium-runtime", ["create", "id"])[0] == "PYTHON"
        assert run_front(place, "radium-runtime", ["create", "id"], "", debug=True)[0] == "PYTHON"
    assert agent.requests == []
