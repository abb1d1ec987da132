"""The program's framework settings reach the worker: thread counts and the like under an
allow-list, capped at the lease's CPU share; nothing else of its environment does
(docs/remoting.md, "Framework settings")."""

from __future__ import annotations

import subprocess

import pytest

from radium_interposer import settings
from tests.interposer.harness import BARE_PYTHON, WorkerHarness

#: A program whose ``probe`` runs on the worker (split entry ``app:probe``) and says what the
#: libraries there use: torch's threads, numpy's OpenBLAS threads, and the environment.
PROGRAM = """
import os
import sys

import numpy as np


def probe():
    import ctypes

    import torch

    paths = {line.split()[-1] for line in open("/proc/self/maps") if "openblas" in line}
    blas = ctypes.CDLL(sorted(p for p in paths if "/" in p)[0])
    names = ("MY_SECRET", "TORCH_HOME", "PYTORCH_NO_CUDA_MEMORY_CACHING", "OMP_NUM_THREADS")
    return (
        torch.get_num_threads(),
        blas.scipy_openblas_get_num_threads64_(),
        {name: os.environ.get(name) for name in names},
        os.getpid(),
    )


if __name__ == "__main__":
    if len(sys.argv) > 1:  # set by the program itself, after a first remote import
        os.environ["OMP_NUM_THREADS"] = sys.argv[1]
        import torch  # another remote import: the worker hears the new settings
    print(np.ones(3).sum())
    torch_threads, blas_threads, env, pid = probe()
    print(torch_threads, blas_threads, env, pid != os.getpid())
"""


def _probe(harness: WorkerHarness, *argv: str, **env: str) -> str:
    """The program's last line, run remoted from the bare Python with ``argv`` and ``env``."""
    path = harness.root / "app.py"
    path.write_text(PROGRAM)
    done = subprocess.run(
        [BARE_PYTHON, str(path), *argv],
        env=harness.env("numpy,torch,app:probe", **env),
        capture_output=True,
        text=True,
        cwd=harness.root,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()[-1]


def test_thread_counts_reach_the_worker_and_other_variables_do_not(
    harness: WorkerHarness,
) -> None:
    line = _probe(
        harness,
        OMP_NUM_THREADS="1",
        MY_SECRET="s3cr3t",
        TORCH_HOME="/home/me/.cache/torch",
        PYTORCH_NO_CUDA_MEMORY_CACHING="1",
    )
    env = "{'MY_SECRET': None, 'TORCH_HOME': None, 'PYTORCH_NO_CUDA_MEMORY_CACHING': '1', "
    assert line == f"1 1 {env}'OMP_NUM_THREADS': '1'}} True"
    assert "program settings: {'OMP_NUM_THREADS': '1', 'PYTORCH_NO" in harness.log()


def test_a_thread_count_above_the_lease_s_cpu_share_is_capped(harness: WorkerHarness) -> None:
    share = settings.cpu_share()  # the worker runs here, in the same CPUs and cgroup
    line = _probe(harness, OMP_NUM_THREADS="999")
    assert line.startswith(f"{share} {share} ")
    assert f"'OMP_NUM_THREADS': '{share}'" in line


def test_settings_changed_after_the_libraries_loaded_apply_at_runtime(
    harness: WorkerHarness,
) -> None:
    if settings.cpu_share() < 2:
        pytest.skip("needs 2 CPUs to tell 2 threads from 1")
    line = _probe(harness, "1", OMP_NUM_THREADS="2")
    assert line.startswith("1 1 ")
    assert "its OpenBLAS set to 1 threads" in harness.log()


def test_only_allowed_settings_are_sent_and_thread_counts_capped() -> None:
    assert settings.allowed("OMP_NUM_THREADS", "4")
    assert settings.allowed("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    assert settings.allowed("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    for name in (
        "TORCH_HOME",
        "TORCH_EXTENSIONS_DIR",
        "PYTORCH_KERNEL_CACHE_PATH",
        "TORCH_LOGS_OUT",
    ):
        assert not settings.allowed(name, "x")
    assert not settings.allowed("TORCH_SOMETHING", "/etc/passwd")  # a path, whatever its name
    assert not settings.allowed("MY_SECRET", "1") and not settings.allowed("PYTHONHASHSEED", "0")
    assert settings.cap("OMP_NUM_THREADS", "4,2", 3) == "3,2"
    assert settings.cap("OMP_NUM_THREADS", "many", 3) == "many"  # ignored there, as here
    assert settings.cap("CUBLAS_WORKSPACE_CONFIG", ":4096:8", 1) == ":4096:8"


def test_framework_flags_set_as_module_properties_reach_the_worker(harness: WorkerHarness) -> None:
    # torch.backends.cudnn is a module whose flags are properties of its class: absent from
    # dir(module), they raised AttributeError, and an assignment stayed on the client.
    result = harness.run(
        "import torch\n"
        "cudnn = torch.backends.cudnn\n"
        "print(cudnn.benchmark, cudnn.deterministic, 'benchmark' in dir(cudnn))\n"
        "cudnn.benchmark = True\n"
        "torch.backends.cudnn.deterministic = True\n"
        "c = torch._C\n"
        "print(cudnn.benchmark, c._get_cudnn_benchmark(), c._get_cudnn_deterministic())\n"
        "with cudnn.flags(enabled=False):\n"
        "    print(cudnn.enabled)\n"
        "print(cudnn.enabled)\n",
        "torch",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:4] == ["False False True", "True True True", "False", "True"]
