from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.interposer.harness import WorkerHarness, bare_python_has_no_numpy

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def runc_spec() -> dict[str, Any]:
    """A config.json as `runc spec` writes it, plus a field newer than our code knows."""
    spec: dict[str, Any] = json.loads((FIXTURES / "runc-spec.json").read_text())
    spec["x-future-field"] = {"kept": True}
    return copy.deepcopy(spec)


@pytest.fixture(autouse=True)
def private_toml_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process loads cache under the test's tmp dir, not the host's /run/radium."""
    from radium import tomlcache

    monkeypatch.setattr(tomlcache, "CACHE_DIR", str(tmp_path / "toml-cache"))


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[WorkerHarness]:
    """A real lease worker, and a client Python without numpy or torch to remote from."""
    assert bare_python_has_no_numpy(), "these tests need /usr/bin/python3 without numpy"
    h = WorkerHarness(tmp_path)
    try:
        yield h
    finally:
        h.close()
