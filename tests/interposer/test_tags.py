"""The value tags in code are the ones docs/data-plane.md's "Values" table names, no more."""

from __future__ import annotations

import re
from pathlib import Path

from radium_interposer import tags

DOC = Path(__file__).resolve().parents[2] / "docs" / "data-plane.md"


def documented() -> set[str]:
    """The tags in the first column of the "Values" table (`h`, `set`, `...`)."""
    section = DOC.read_text().split("\n## Values\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    return {tag for cell in rows for tag in re.findall(r"`([^`]+)`", cell)}


def test_every_tag_in_code_is_in_the_spec_and_back() -> None:
    named = [getattr(tags, name) for name in tags.__all__]
    in_code = {value for value in named if isinstance(value, str)}
    assert len(in_code) == len(
        [value for value in named if isinstance(value, str)]
    )  # one name each
    # The slot of a template is the batches' own (docs/data-plane.md, "Batches").
    assert in_code - {tags.SLOT} == documented()
    assert in_code > tags.REFERENCES > tags.HELD
