"""The corpus: real programs (each names the tutorial it follows), remoted from a Python without
the framework, print exactly what they print locally with it: in module mode (the framework
remoted) and in function mode (a split file that also names the program's own functions, which
then run whole on the worker)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from tests.interposer.harness import WorkerHarness

PROGRAMS = sorted(p for p in Path(__file__).parent.glob("*.py") if p.name[0] != "_" and
                  not p.name.startswith("test_"))  # fmt: skip


def remote_for(program: Path) -> str:
    """What the program's Python lacks: torch and numpy for the torch programs."""
    return "torch,numpy" if program.name.startswith("torch") else "numpy"


def test_the_corpus_is_at_least_fifteen_programs_each_citing_its_origin() -> None:
    assert len(PROGRAMS) >= 15
    for program in PROGRAMS:
        header = program.read_text().split('"""')[1]
        assert "Follows" in header and "https://" in header and "Changed:" in header, program


def functions_of(program: Path) -> list[str]:
    """The program's top-level functions, as written."""
    body = ast.parse(program.read_text()).body
    return [node.name for node in body if isinstance(node, ast.FunctionDef)]


def split_for(program: Path) -> str:
    """Function mode's split file: the framework, and every function of the program."""
    functions = [f"{program.stem}:{name}" for name in functions_of(program)]
    return (
        f"modules = {json.dumps(remote_for(program).split(','))}\n"
        f"functions = {json.dumps(functions)}\n"
    )


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.stem)
def test_a_program_remoted_prints_what_it_prints_locally(
    harness: WorkerHarness, program: Path
) -> None:
    out = harness.same_as_local("", remote_for(program), path=program)
    assert out.strip(), "the program printed nothing"


@pytest.mark.parametrize("program", [p for p in PROGRAMS if functions_of(p)], ids=lambda p: p.stem)
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
