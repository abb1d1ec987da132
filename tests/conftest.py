from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

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
