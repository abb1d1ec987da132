"""The corpus: real programs (each names the tutorial it follows), remoted from a Python without
the framework, print exactly what they print locally with it."""

from __future__ import annotations

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


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.stem)
def test_a_program_remoted_prints_what_it_prints_locally(
    harness: WorkerHarness, program: Path
) -> None:
    out = harness.same_as_local("", remote_for(program), path=program)
    assert out.strip(), "the program printed nothing"
