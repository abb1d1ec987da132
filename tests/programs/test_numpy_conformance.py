"""A peer's own test suite: numpy's test files, taken from the installed numpy, run with pytest
locally (this Python, numpy installed) and remoted (``/usr/bin/python3``, no numpy, numpy on a
worker). Every test that passes locally passes remoted, or is in ``KNOWN`` with its reason
(the same table is in docs/remoting.md, "numpy's own tests").

The files are copied into a directory of their own and run with ``--noconftest``: numpy's
``conftest.py`` imports hypothesis and numpy's private test modules and sets up fixtures for
numpy's own CI (FPU-mode checks, doctest namespaces, thread-safety markers) that none of these
files needs; without it both runs see the same plain files, so a difference is the remoting's.
The remoted pytest is importable without numpy: a directory linking pytest's own packages only.

    .venv/bin/python -m tests.programs.test_numpy_conformance [--whole]

runs them all (``--whole``: test_linalg.py whole rather than its subset) and prints the counts
and times per file.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy
import pytest

from tests.interposer.harness import BARE_PYTHON, INTERPOSER, WorkerHarness, local_env

NUMPY = Path(numpy.__file__).parent
SITE = NUMPY.parent
#: pytest 9 and what it imports, nothing else of this Python's site-packages.
PYTEST_PACKAGES = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "pygments", "py.py")

#: file -> the pytest ``-k`` selection the suite runs (None: the whole file). test_linalg.py
#: whole takes over 5 minutes remoted (its 469 tests make tens of thousands of small calls):
#: the suite runs one class per function (148 tests; the many-parameter classes
#: TestMatrixPower, TestQR, TestCholesky, TestCond, TestEig and the float32/int64 norm classes
#: are left to the script), and ``--whole`` (the script) runs it all.
LINALG_SUBSET = (
    "TestSolve or TestInv or TestDet or TestEigvals or TestEigh or TestSVD or TestLstsq"
    " or TestMultiDot or TestMatrixRank or TestNormDouble or TestPinv or TestTensorinv"
    " or TestTensorsolve or test_reduced_rank or test_trace or test_tensordot"
    " or test_vector_norm or test_matrix_norm or test_unsupported_commontype"
)
FILES: dict[str, str | None] = {
    "linalg/tests/test_regression.py": None,
    "fft/tests/test_helper.py": None,
    "polynomial/tests/test_polynomial.py": None,
    "lib/tests/test_shape_base.py": None,
    "linalg/tests/test_linalg.py": LINALG_SUBSET,
}

#: pytest node id (file.py::Class::test) -> why it differs remoted. Kept equal to docs/remoting.md
#: ("numpy's own tests, remoted").
DUNDER = (
    "the test calls a dunder of a remote array itself (sv.__array_wrap__(s)): a proxy does not"
    " look dunder attributes up remotely, so that local code probing them (__array_interface__,"
    " __array_struct__) never makes a round trip or mistakes a proxy for an array"
)
OUT_IDENTITY = (
    "multi_dot(..., out=out) is out: a remote result that is one of the call's arguments comes"
    " back as a new proxy of that object, not as the argument's own proxy"
)
PARAMETER_ID = (
    "pytest names a parameter by its __name__ only for a Python function or class: np.asarray"
    " remoted is a proxy, so the test runs (and passes) as test_kron_smoke[array_class0] and [1]"
)
KNOWN: dict[str, str] = {
    "test_linalg.py::TestLstsq::test_sq_cases": DUNDER,
    "test_linalg.py::TestLstsq::test_nonsq_cases": DUNDER,
    "test_linalg.py::TestLstsq::test_empty_sq_cases": DUNDER,
    "test_linalg.py::TestLstsq::test_empty_nonsq_cases": DUNDER,
    "test_linalg.py::TestMultiDot::test_two_arguments_and_out": OUT_IDENTITY,
    "test_linalg.py::TestMultiDot::test_three_arguments_and_out": OUT_IDENTITY,
    "test_linalg.py::TestMultiDot::test_dynamic_programming_optimization_and_out": OUT_IDENTITY,
    "test_shape_base.py::TestKron::test_kron_smoke[asarray]": PARAMETER_ID,
    "test_shape_base.py::TestKron::test_kron_smoke[asmatrix]": PARAMETER_ID,
}


def pytest_path(root: Path) -> Path:
    """A directory holding pytest's own packages only, for a Python without numpy."""
    packages = root / "pytest-only"
    packages.mkdir(exist_ok=True)
    for name in PYTEST_PACKAGES:
        link = packages / name
        if not link.exists():
            link.symlink_to(SITE / name)
    return packages


def copy_of(relative: str, root: Path) -> Path:
    """The test file, alone in a directory of its own (so no numpy conftest applies)."""
    directory = root / relative.replace("/", "_").removesuffix(".py")
    directory.mkdir(exist_ok=True)
    return Path(shutil.copy(NUMPY / relative, directory))


def outcomes(junit: Path) -> dict[str, str]:
    """pytest node id (file.py::Class::test) -> passed / failed / error / skipped, from
    pytest's junit XML."""
    result: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        module, *classes = str(case.get("classname")).split(".")
        name = "::".join([f"{module}.py", *classes, str(case.get("name"))])
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        result[name] = kinds[0] if kinds else "passed"
    return result


def run_file(
    test: Path, python: str, env: dict[str, str], select: str | None
) -> tuple[dict[str, str], float, str]:
    """Run one test file with pytest; its per-test outcomes, wall time and output tail."""
    junit = test.parent / f"junit-{Path(python).name}.xml"
    argv = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--noconftest",
            f"--junitxml={junit}", "-o", "junit_family=xunit1", test.name]  # fmt: skip
    if select:
        argv += ["-k", select]
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=test.parent, capture_output=True, text=True,
                          timeout=1800)  # fmt: skip
    elapsed = time.perf_counter() - started
    tail = (done.stdout + done.stderr)[-3000:]
    if not junit.exists():
        return {"<collection>": "error"}, elapsed, tail
    return outcomes(junit), elapsed, tail


def local_and_remote(
    harness: WorkerHarness, relative: str, select: str | None
) -> tuple[dict[str, str], dict[str, str], float, float, str]:
    """The file's outcomes run locally and remoted, and each run's time."""
    test = copy_of(relative, harness.root)
    local, local_s, _ = run_file(test, sys.executable, local_env(), select)
    path = f"{harness.root / 'boot'}{os.pathsep}{INTERPOSER}{os.pathsep}"
    path += str(pytest_path(harness.root))
    env = harness.env("numpy", PYTHONPATH=path)
    remote, remote_s, tail = run_file(test, BARE_PYTHON, env, select)
    return local, remote, local_s, remote_s, tail


def regressions(local: dict[str, str], remote: dict[str, str]) -> list[str]:
    """Tests that pass locally, do not pass remoted and are not KNOWN."""
    return [
        f"{name} ({remote.get(name, 'missing')})"
        for name, outcome in sorted(local.items())
        if outcome == "passed" and remote.get(name) != "passed" and name not in KNOWN
    ]


@pytest.mark.parametrize("relative", list(FILES), ids=lambda r: Path(r).stem)
def test_numpy_tests_that_pass_locally_pass_remoted(harness: WorkerHarness, relative: str) -> None:
    local, remote, _, _, tail = local_and_remote(harness, relative, FILES[relative])
    assert sum(o == "passed" for o in local.values()) > 0, local
    missing = regressions(local, remote)
    assert not missing, f"{len(missing)} differ:\n" + "\n".join(missing[:40]) + "\n" + tail
    # A known difference that no longer differs is taken off KNOWN (and docs/remoting.md).
    stale = [name for name in KNOWN if remote.get(name) == "passed"]
    assert not stale, f"known differences that now pass remoted: {stale}"


def test_every_known_difference_is_a_test_of_a_file_here() -> None:
    files = {Path(relative).name for relative in FILES}
    for name in KNOWN:
        assert name.split("::")[0] in files, name


def main(argv: list[str] | None = None) -> int:
    """Counts and times per file, locally and remoted (not a pass/fail test)."""
    parser = argparse.ArgumentParser(prog="tests.programs.test_numpy_conformance")
    parser.add_argument("--whole", action="store_true", help="test_linalg.py whole")
    parser.add_argument("--files", help="these files only (comma-separated stems)")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="radium-numpy-tests-"))
    harness = WorkerHarness(root)
    print(f"{'file':<22} {'local pass':>10} {'remote pass':>11} {'differ':>6} "
          f"{'local s':>8} {'remote s':>9}")  # fmt: skip
    try:
        for relative, select in FILES.items():
            if args.files and Path(relative).stem not in args.files.split(","):
                continue
            local, remote, local_s, remote_s, _ = local_and_remote(
                harness, relative, None if args.whole else select
            )
            missing = regressions(local, remote)
            print(f"{Path(relative).stem:<22} {sum(o == 'passed' for o in local.values()):>10} "
                  f"{sum(o == 'passed' for o in remote.values()):>11} {len(missing):>6} "
                  f"{local_s:8.1f} {remote_s:9.1f}", flush=True)  # fmt: skip
            for line in missing:
                print("   ", line)
    finally:
        harness.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
