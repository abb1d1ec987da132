"""A prepared claim's CDI spec."""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pytest

from radium.dra import cdi
from radium.errors import SpecError
from tests import cdi_schema

UID = "5b0f1d1c-39a3-4f3e-9d5e-2a4c7c0b6a11"


def test_the_spec_is_valid_cdi_and_names_the_claim(tmp_path: Path) -> None:
    path = Path(cdi.write(str(tmp_path / "cdi"), UID))
    spec = json.loads(path.read_text())
    cdi_schema.validate(spec)
    assert cdi.device_id(UID) == f"radium.io/claim={UID}"
    assert spec["kind"] == "radium.io/claim" and spec["devices"][0]["name"] == UID
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    assert cdi.write(str(tmp_path / "cdi"), UID) == str(path)  # idempotent
    cdi.remove(str(tmp_path / "cdi"), UID)
    cdi.remove(str(tmp_path / "cdi"), UID)
    assert os.listdir(tmp_path / "cdi") == []


def test_the_schema_check_catches_a_broken_spec() -> None:
    spec = cdi.spec(UID)
    spec["devices"][0]["containerEdits"]["mounts"] = [{"hostPath": 1, "containerPath": "/x"}]
    with pytest.raises(jsonschema.ValidationError, match="1 is not of type 'string'"):
        cdi_schema.validate(spec)  # checked in defs.json: the schema's references resolve
    del spec["devices"][0]["containerEdits"]
    with pytest.raises(jsonschema.ValidationError):
        cdi_schema.validate(spec)


def test_a_uid_that_cannot_name_a_device_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="is not a Kubernetes uid"):
        cdi.write(str(tmp_path), "../../etc/x")
    assert list(tmp_path.iterdir()) == []
