"""The data plane for real: containers and local processes remote numpy to acceptors that run in
their own network namespaces, through the node agent; the containers have no network at all."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy
import pytest

from integration import images
from integration.dockerd import Dockerd
from integration.pool import PoolCluster
from integration.radium_env import RadiumEnv
from integration.test_leases import radium_run, stop_agent
from tests.interposer import test_callbacks, test_files
from tests.interposer.test_remoting import TRAINING
from tests.programs.test_corpus import PROGRAMS, name_of, remote_for

RADIUM_CLI = str(Path(sys.executable).parent / "radium")
#: Debian's python3, without numpy: the local process of ``radium exec``.
SYSTEM_PYTHON = "/usr/bin/python3"
BARE = "radium-test/bookworm:dataplane"
OTHER_SUITES = ("bullseye", "trixie")  # Python 3.9 and 3.13; bookworm has 3.11
NUMPY1 = "radium-test/bookworm-numpy:dataplane"

INVERSE = """
import numpy as np
a = np.random.rand(1500, 1500)
print(np.allclose(np.linalg.inv(a) @ a, np.eye(1500)))
"""
CHILD_PYTHON = """
import subprocess, sys
code = "import numpy; print(numpy.eye(3).sum())"
print(subprocess.check_output([sys.executable, "-c", code], text=True).strip())
"""
OLD_NUMPY_LOCAL_ARRAYS = """
import numpy as np
assert type(np.linalg).__name__ == "RemoteModule", type(np.linalg)
rng = np.random.default_rng(3)
a = rng.random((200, 200)) + 200 * np.eye(200)
b = rng.random(200)
remote_inv = np.asarray(np.linalg.inv(a))
remote_x = np.asarray(np.linalg.solve(a, b))
print(np.__version__)
print(np.allclose(remote_inv @ a, np.eye(200)), np.allclose(a @ remote_x, b))
print(np.isclose(float(np.linalg.norm(a)), float(np.sqrt((a * a).sum())), rtol=1e-12))
"""
TORCH_CHAIN = """
import torch
torch.manual_seed(0)
a = torch.randn(64, 64)
x = torch.randn(64, 64)
with torch.no_grad():
    for _ in range(10):
        x = torch.tanh(a @ x)
print(repr(x.sum().item()))
print(torch.nn.functional.relu(torch.tensor([-1.0, 2.0])).tolist())
"""


@pytest.fixture(scope="module")
def remoting(
    radium: RadiumEnv, cluster: PoolCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    """A Radium config whose agent (this namespace) leases from the namespaced acceptors."""
    agent = tmp_path_factory.mktemp("dp-agent")
    config = radium.client_config("dataplane.toml", cluster.client_table(), agent)
    try:
        yield config
    finally:
        stop_agent(config)


@pytest.fixture(scope="module")
def dp_dockerd(radium: RadiumEnv, remoting: Path) -> Iterator[Dockerd]:
    daemon = Dockerd({"radium": radium.runtime}, radium.environ(remoting))
    try:
        daemon.start()
        daemon.import_image(images.debian_tar("bookworm"), BARE)
        daemon.import_image(images.debian_tar("bookworm", with_numpy=True), NUMPY1)
        for suite in OTHER_SUITES:
            daemon.import_image(images.debian_tar(suite), f"radium-test/{suite}:dataplane")
        yield daemon
    finally:
        daemon.stop()


def acceptor_logs(cluster: PoolCluster) -> str:
    return "".join(service.log.read_text() for service in cluster.acceptors.values())


def test_image_without_numpy_computes_with_the_acceptor_numpy(
    cluster: PoolCluster, dp_dockerd: Dockerd
) -> None:
    before = acceptor_logs(cluster).count("connection closed after")
    done = radium_run(
        dp_dockerd, "RADIUM_GPUS=1", "--rm", "-e", "RADIUM_REMOTE=numpy", BARE,
        "python3", "-c", INVERSE + CHILD_PYTHON,
    )  # fmt: skip
    assert done.stdout.splitlines() == ["True", "3.0"], done.stderr
    # The acceptors' workers served the calls (one connection per Python process).
    log = acceptor_logs(cluster)
    calls = [int(n) for n in re.findall(r"connection closed after (\d+) calls", log)]
    assert len(calls) - before >= 2 and max(calls) >= 6
    # Still no numpy in the image: plain runc says so.
    plain = dp_dockerd.docker("run", "--rm", BARE, "python3", "-c", "import numpy", check=False)
    assert plain.returncode != 0 and "No module named 'numpy'" in plain.stderr


@pytest.mark.parametrize("suite", OTHER_SUITES)
def test_the_interposer_remotes_on_every_debian_python(dp_dockerd: Dockerd, suite: str) -> None:
    code = (
        "import sys, numpy, threading\n"
        "t = threading.Thread(target=lambda: print(int(numpy.arange(5).sum())))\n"
        "t.start(); t.join()\n"
        "print(sys.version_info[:2], round(float(numpy.linalg.det(numpy.eye(3) * 2)), 6))\n"
    )
    done = radium_run(
        dp_dockerd, "RADIUM_GPUS=1", "--rm", "-e", "RADIUM_REMOTE=numpy",
        f"radium-test/{suite}:dataplane", "python3", "-c", code,
    )  # fmt: skip
    version = images.python_version(suite).split(".")
    assert done.stdout.splitlines() == ["10", f"({version[0]}, {version[1]}) 8.0"]


def test_old_numpy_in_the_image_remotes_linalg_to_numpy_2(
    cluster: PoolCluster, dp_dockerd: Dockerd
) -> None:
    assert numpy.__version__.startswith("2."), "the acceptors' Python should have numpy 2"
    done = radium_run(
        dp_dockerd, "RADIUM_GPUS=1", "--rm", "-e", "RADIUM_REMOTE=numpy.linalg", NUMPY1,
        "python3", "-c", OLD_NUMPY_LOCAL_ARRAYS,
    )  # fmt: skip
    version, results, norm = done.stdout.splitlines()
    assert version.startswith("1."), version
    assert (results, norm) == ("True True", "True")


def test_image_without_torch_runs_a_torch_workload_remotely(
    cluster: PoolCluster, dp_dockerd: Dockerd
) -> None:
    done = radium_run(
        dp_dockerd, "RADIUM_GPUS=1", "--rm", "-e", "RADIUM_REMOTE=torch", BARE,
        "python3", "-c", TORCH_CHAIN,
    )  # fmt: skip
    remote_sum, relu = done.stdout.splitlines()
    # The same workload with the torch of this process (the acceptors' Python).
    local = subprocess.run(
        [sys.executable, "-c", TORCH_CHAIN], capture_output=True, text=True, check=True
    )
    assert [remote_sum, relu] == local.stdout.splitlines()
    assert relu == "[0.0, 2.0]"


def test_a_torch_program_with_its_own_classes_runs_in_a_torchless_container(
    cluster: PoolCluster, dp_dockerd: Dockerd, tmp_path: Path
) -> None:
    app = tmp_path / "app"
    app.mkdir()
    (app / "train.py").write_text(TRAINING)
    done = radium_run(
        dp_dockerd, "RADIUM_GPUS=1", "--rm", "-e", "RADIUM_REMOTE=torch", "-v", f"{app}:/app",
        BARE, "python3", "/app/train.py",
    )  # fmt: skip
    local = subprocess.run(
        [sys.executable, str(app / "train.py")], capture_output=True, text=True, check=True
    )
    assert done.stdout == local.stdout
    assert done.stdout.splitlines()[-1] == "[0.387]"


def test_callbacks_and_the_program_s_own_files_work_from_a_torchless_container(
    cluster: PoolCluster, dp_dockerd: Dockerd, tmp_path: Path
) -> None:
    """Lambdas and closures called back into the container; torch.save/np.save/open in remote
    code write the container's files (here a bind mount), never the acceptor's."""
    for name, program in (("hooks", test_callbacks.TRAINING), ("files", test_files.PROGRAM)):
        app, local = tmp_path / name / "app", tmp_path / name / "local"
        app.mkdir(parents=True)
        local.mkdir()
        (app / "main.py").write_text(program)
        done = radium_run(
            dp_dockerd, "RADIUM_GPUS=1", "--rm", "-e", "RADIUM_REMOTE=torch,numpy",
            "-v", f"{app}:/app", "-w", "/app", BARE, "python3", "/app/main.py",
        )  # fmt: skip
        here = subprocess.run(
            [sys.executable, str(app / "main.py")], cwd=local, capture_output=True, text=True,
            check=True,
        )  # fmt: skip
        assert done.stdout == here.stdout, done.stderr
    assert (tmp_path / "files" / "app" / "ckpt.pt").stat().st_size > 1000
    assert sorted(p.name for p in (tmp_path / "files" / "app").iterdir()) == [
        "a.npy", "b.npz", "big.npy", "c.csv", "ckpt.pt", "main.py"
    ]  # fmt: skip


@pytest.mark.parametrize("program", PROGRAMS, ids=name_of)
def test_the_corpus_programs_run_in_a_container_without_torch_or_numpy(
    cluster: PoolCluster, dp_dockerd: Dockerd, tmp_path: Path, program: Path
) -> None:
    """Each program of the corpus (a file, or a directory of its own modules), unmodified, in
    a container without torch or numpy and without a network, prints what it prints here."""
    done = radium_run(
        dp_dockerd, "RADIUM_GPUS=1", "--rm", "-e", f"RADIUM_REMOTE={remote_for(program)}",
        "-v", f"{program.parent}:/programs:ro", "-v", f"{tmp_path}:/work", "-w", "/work",
        BARE, "python3", f"/programs/{program.name}",
    )  # fmt: skip
    # The environment the sandboxed worker has (acceptor/sandbox.py): none of this machine's
    # math-library settings, such as an OPENBLAS_CORETYPE that picks other BLAS kernels.
    here = subprocess.run(
        [sys.executable, str(program)], cwd=tmp_path, capture_output=True, text=True, check=True,
        env={"PATH": os.environ["PATH"]},
    )  # fmt: skip
    assert done.stdout == here.stdout, done.stderr
    assert done.stdout.strip()


def test_radium_exec_runs_a_local_process_against_a_namespaced_acceptor(
    radium: RadiumEnv, cluster: PoolCluster, remoting: Path, tmp_path: Path
) -> None:
    app = tmp_path / "app.py"
    app.write_text(INVERSE)
    done = subprocess.run(
        [RADIUM_CLI, "exec", "--remote", "numpy", "--", SYSTEM_PYTHON, str(app)],
        env=radium.environ(remoting),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert (done.returncode, done.stdout) == (0, "True\n"), done.stderr
    assert not [le for le in cluster.client().leases() if "exec-" in le.holder]


def test_radium_exec_without_a_remote_list_says_what_to_do(
    radium: RadiumEnv, remoting: Path
) -> None:
    done = subprocess.run(
        [RADIUM_CLI, "exec", "--", "true"],
        env=radium.environ(remoting),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "radium: nothing to remote; add --remote MODULE or --split FILE"
    ]


def test_radium_run_passes_docker_options_and_shows_the_lease(
    radium: RadiumEnv, remoting: Path, dp_dockerd: Dockerd
) -> None:
    env = {**radium.environ(remoting), "DOCKER_HOST": f"unix://{dp_dockerd.socket}"}
    done = subprocess.run(
        [RADIUM_CLI, "run", "--gpus", "1", "--remote", "numpy.linalg", "-v", "--",
         "--rm", "--network", "none", "-e", "GREETING=hi", NUMPY1, "python3", "-c",
         "import os, numpy\nprint(os.environ['GREETING'], type(numpy.linalg).__name__,"
         " round(float(numpy.linalg.det(numpy.eye(2) * 3)), 6))"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (0, "hi RemoteModule 9.0\n"), done.stderr
    assert re.search(r"radium: lease l-\w+ on acceptor rdm-acc-\w devices cpu\d", done.stderr)


def test_radium_run_against_a_docker_without_radium(radium: RadiumEnv, remoting: Path) -> None:
    plain = Dockerd({}, radium.environ(remoting))
    try:
        plain.start()
        done = subprocess.run(
            [RADIUM_CLI, "run", "--gpus", "1", "img"],
            env={**radium.environ(remoting), "DOCKER_HOST": f"unix://{plain.socket}"},
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        plain.stop()
    # docker's own error, then what to do about it.
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "radium: docker has no 'radium' runtime; run: sudo radium setup docker --restart"
    )
