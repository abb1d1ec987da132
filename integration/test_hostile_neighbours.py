"""Other local users on a client node cannot reach a container's lease (issue 34, hole 1).

An unprivileged local user (uid 65534, through ``setpriv``) tries the data-plane socket of a
leased container (run as a non-root user, whose remoted calls must keep working) and of a root
``radium exec``. Each probe runs twice: as Radium leaves the socket, where the connect is
refused, and with the old modes put back (0755 directories, a 0666 socket), where the same
probe takes an authenticated connection to the victim's worker: so it would catch the hole.
The runtime directories live under ``/run`` as in production, not under pytest's private
temporary directory, which would hide the hole.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration import images
from integration.dockerd import Dockerd
from integration.pool import PoolCluster, wait_until
from integration.radium_env import RadiumEnv
from integration.test_leases import radium_run, stop_agent
from radium_interposer import wire

RADIUM_CLI = str(Path(sys.executable).parent / "radium")
SYSTEM_PYTHON = "/usr/bin/python3"
IMAGE = "radium-test/bookworm:hostile"
ATTACKER = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--")
#: Connect to a container's dp.sock as its agent's client would, and report what came back.
ATTACK = r"""
import json, os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(20)
try:
    os.chdir(os.path.dirname(sys.argv[1]))  # container ids make paths too long for sun_path
    s.connect(os.path.basename(sys.argv[1]))
except OSError as exc:
    print(json.dumps({"refused": exc.strerror or repr(exc)})); sys.exit(0)
s.sendall(b'{"op": "connect"}\n')
message, ancillary, _, _ = s.recvmsg(4096, socket.CMSG_SPACE(4))
fds = sum(len(data) // 4 for level, kind, data in ancillary if kind == socket.SCM_RIGHTS)
print(json.dumps({"reply": json.loads(message), "fds": fds}))
"""
#: The victim: remoted numpy as its own (non-root) user, then it waits while it is attacked.
VICTIM = "import numpy, time; print(numpy.eye(3).sum(), flush=True); time.sleep(120)"


@pytest.fixture(scope="module")
def client_node(
    radium: RadiumEnv, cluster: PoolCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, Path]]:
    """(config, state_dir): an agent leasing from ``cluster``, runtime dirs under ``/run``."""
    run_dir = Path(f"/run/radium-hostile-{secrets.token_hex(4)}")
    run_dir.mkdir(mode=0o755)
    os.chmod(run_dir, 0o755)  # as /run/radium is
    state_dir = run_dir / "containers"
    agent = tmp_path_factory.mktemp("hostile-agent")
    config = radium.client_config("hostile.toml", cluster.client_table(), agent)
    ours = f'state_dir = "{radium.state_dir}"'
    config.write_text(config.read_text().replace(ours, f'state_dir = "{state_dir}"'))
    assert str(state_dir) in config.read_text()
    try:
        yield config, state_dir
    finally:
        stop_agent(config)
        shutil.rmtree(run_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def hostile_dockerd(radium: RadiumEnv, client_node: tuple[Path, Path]) -> Iterator[Dockerd]:
    daemon = Dockerd({"radium": radium.runtime}, radium.environ(client_node[0]))
    try:
        daemon.start()
        daemon.import_image(images.debian_tar("bookworm"), IMAGE)
        yield daemon
    finally:
        daemon.stop()


def attack(socket_path: Path) -> dict[str, object]:
    done = subprocess.run(
        [*ATTACKER, SYSTEM_PYTHON, "-I", "-c", ATTACK, str(socket_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def unprotect(state_dir: Path, socket_path: Path) -> None:
    """The modes Radium used before: any local user reached every container's socket."""
    for directory in (state_dir, socket_path.parent):
        os.chmod(directory, 0o755)
    os.chmod(socket_path, 0o666)


def probe_both_ways(state_dir: Path, socket_path: Path) -> None:
    assert attack(socket_path) == {"refused": "Permission denied"}
    unprotect(state_dir, socket_path)
    # The same probe, unprotected: an authenticated connection to the victim's worker.
    assert attack(socket_path) == {"reply": {"ok": True, "v": wire.VERSION}, "fds": 1}


def test_a_local_user_cannot_take_a_containers_lease(
    hostile_dockerd: Dockerd, client_node: tuple[Path, Path]
) -> None:
    _, state_dir = client_node
    started = radium_run(
        hostile_dockerd, "RADIUM_GPUS=1", "-d", "--user", "1000:1000",
        "-e", "RADIUM_REMOTE=numpy", IMAGE, "python3", "-c", VICTIM,
    )  # fmt: skip
    container = started.stdout.strip()
    try:
        # The container's own (non-root) user remotes: its socket is its own.
        logs = lambda: hostile_dockerd.docker("logs", container)  # noqa: E731
        try:
            wait_until(lambda: "3.0" in logs().stdout, 60, "the victim's remote call")
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {logs().stderr}") from None
        runtime = state_dir / container
        info = [p.stat() for p in (state_dir, runtime, runtime / "dp.sock")]
        assert [(s.st_mode & 0o777, s.st_gid) for s in info] == [
            (0o700, 0),
            (0o750, 1000),
            (0o660, 1000),
        ]
        probe_both_ways(state_dir, runtime / "dp.sock")
    finally:
        hostile_dockerd.docker("rm", "-f", container, check=False)


def test_a_local_user_cannot_take_a_root_radium_exec_lease(
    radium: RadiumEnv, client_node: tuple[Path, Path], tmp_path: Path
) -> None:
    config, state_dir = client_node
    app = tmp_path / "app.py"
    app.write_text(VICTIM)
    victim = subprocess.Popen(
        [RADIUM_CLI, "exec", "--remote", "numpy", "--", SYSTEM_PYTHON, str(app)],
        env=radium.environ(config),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert victim.stdout is not None
        assert victim.stdout.readline() == "3.0\n"
        (runtime,) = [p for p in state_dir.iterdir() if p.name.startswith("exec-")]
        assert (runtime.stat().st_mode & 0o777, runtime.stat().st_gid) == (0o750, 0)
        probe_both_ways(state_dir, runtime / "dp.sock")
    finally:
        victim.terminate()
        victim.communicate(timeout=30)
