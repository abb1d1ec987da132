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
