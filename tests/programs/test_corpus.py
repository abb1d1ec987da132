"""The corpus: real programs (each names the tutorial it follows), remoted from a Python without
the framework, print exactly what they print locally with it: in module mode (the framework
remoted) and in function mode (a split file that also names the program's own functions, which
then run whole on the worker). And function mode from a Python that has the framework: a split
file naming only the program's functions, so the program's own torch/numpy objects (devices,
tensors, models, arrays, numpy scalars) cross to them.

A program is a top-level ``*.py`` file here, or a directory ``NAME/`` holding ``main.py`` and
the program's own modules beside it (``import data, model``); ``torch_*`` programs remote torch
and numpy, ``numpy_*`` programs numpy."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.interposer.harness import WorkerHarness, local_env

HERE = Path(__file__).parent


def name_of(program: Path) -> str:
    """The program's name: its file's stem, or its directory's name for a directory program."""
    return program.parent.name if program.parent != HERE else program.stem


#: Each program's main file: the single-file programs, then each directory program's main.py.
PROGRAMS = sorted(
    [p for p in HERE.glob("*.py") if p.name[0] != "_" and not p.name.startswith("test_")]
    + [p for p in HERE.glob("*/main.py") if p.parent.name[0] != "_"],
    key=name_of,
)


def remote_for(program: Path) -> str:
    """What the program's Python lacks: torch and numpy for the torch programs."""
    return "torch,numpy" if name_of(program).startswith("torch") else "numpy"


def test_the_corpus_is_at_least_twenty_five_programs_each_citing_its_origin() -> None:
    assert len(PROGRAMS) >= 25
    assert any(program.name == "main.py" for program in PROGRAMS)  # a program of several files
    for program in PROGRAMS:
        header = program.read_text().split('"""')[1]
        assert "Follows" in header and "https://" in header and "Changed:" in header, program


def functions_of(program: Path) -> list[str]:
    """The program's top-level functions, as written."""
    body = ast.parse(program.read_text()).body
    return [node.name for node in body if isinstance(node, ast.FunctionDef)]


def split_for(program: Path, modules: bool = True) -> str:
    """Function mode's split file: the framework (unless ``modules`` is false: a Python that
    has it), and every function of the program."""
    functions = [f"{program.stem}:{name}" for name in functions_of(program)]
    remote = remote_for(program).split(",") if modules else []
    return f"modules = {json.dumps(remote)}\nfunctions = {json.dumps(functions)}\n"


#: Programs whose functions are not meant to be remoted one by one, and why (docs/remoting.md).
NOT_IN_FUNCTION_MODE = {
    # `implements` is a decorator that registers each function into a module-level dict:
    # remoted, it would fill the worker's copy of HANDLED_FUNCTIONS ("The program's state":
    # what shipped code writes into a global stays on the worker), and the functions it
    # registers are called by numpy through that dict, never by their names.
    "numpy_array_containers": "a registry decorator and the functions it registers",
}
WITH_FUNCTIONS = [p for p in PROGRAMS if functions_of(p) and name_of(p) not in NOT_IN_FUNCTION_MODE]


@pytest.mark.parametrize("program", PROGRAMS, ids=name_of)
def test_a_program_remoted_prints_what_it_prints_locally(
    harness: WorkerHarness, program: Path
) -> None:
    out = harness.same_as_local("", remote_for(program), path=program)
    assert out.strip(), "the program printed nothing"


@pytest.mark.parametrize("program", WITH_FUNCTIONS, ids=name_of)
def test_a_program_with_its_functions_in_a_split_file_prints_what_it_prints_locally(
    harness: WorkerHarness, program: Path
) -> None:
    split = harness.root / "split.toml"
    split.write_text(split_for(program))
    out = harness.same_as_local("", "", path=program, RADIUM_SPLIT=str(split))
    assert out.strip(), "the program printed nothing"
    log = harness.log()
    for name in functions_of(program):  # each ran on the worker, shipped when first called
        assert f"def {name}(" in log, (name, log)


#: Programs that differ in function mode from a Python with the framework, and why: each is
#: expected to fail (strictly: one that starts passing fails, so it is taken off this list).
FRAMEWORK_MODE_DIFFERS = {
    # Its remoted transforms return tensors of the worker, which come back as remote objects;
    # the program's own DataLoader (its local torch) cannot collate them (docs/remoting.md,
    # "Your own library objects, in function mode": results come back as remote objects).
    "torch_datasets": "a remoted function's tensor result is a remote object to local torch",
}
FRAMEWORK_MODE = [
    pytest.param(p, marks=pytest.mark.xfail(strict=True, reason=FRAMEWORK_MODE_DIFFERS[name_of(p)]))
    if name_of(p) in FRAMEWORK_MODE_DIFFERS else p
    for p in WITH_FUNCTIONS
]  # fmt: skip


@pytest.mark.parametrize("program", FRAMEWORK_MODE, ids=name_of)
def test_a_program_with_the_framework_and_its_functions_remoted_prints_what_it_prints_locally(
    harness: WorkerHarness, program: Path
) -> None:
    split = harness.root / "split.toml"
    split.write_text(split_for(program, modules=False))
    remoted = harness.program(program, "", python=sys.executable, RADIUM_SPLIT=str(split))
    assert remoted.returncode == 0, f"stdout:\n{remoted.stdout}\nstderr:\n{remoted.stderr}"
    local_root = harness.root / "local"
    local_root.mkdir(exist_ok=True)
    local = subprocess.run([sys.executable, str(program)], env=local_env(),
                           capture_output=True, text=True, timeout=600, cwd=local_root)  # fmt: skip
    assert local.returncode == 0, local.stderr
    assert remoted.stdout == local.stdout
    assert local.stdout.strip(), "the program printed nothing"
    log = harness.log()
    for name in functions_of(program):  # each ran on the worker, shipped when first called
        assert f"def {name}(" in log, (name, log)
