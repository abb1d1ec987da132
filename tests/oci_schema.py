"""Validate config.json documents against the OCI runtime-spec JSON schema.

The schema comes from Debian's golang-github-opencontainers-specs-dev (RADIUM_OCI_SCHEMA_DIR
overrides); when it is missing the test fails and says how to install it.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT4

SCHEMA_DIR = Path(
    os.environ.get(
        "RADIUM_OCI_SCHEMA_DIR",
        "/usr/share/gocode/src/github.com/opencontainers/runtime-spec/schema",
    )
)
_BASE = "file:///oci-runtime-spec/"


def _load(name: str) -> Any:
    path = SCHEMA_DIR / name
    if not path.exists():
        raise AssertionError(
            f"OCI runtime-spec schema {path} is missing: "
            "apt-get install golang-github-opencontainers-specs-dev"
        )
    return json.loads(path.read_text())


@lru_cache(maxsize=1)
def _validator() -> jsonschema.Draft4Validator:
    def retrieve(uri: str) -> Resource[Any]:
        return Resource.from_contents(_load(uri.rsplit("/", 1)[-1]), default_specification=DRAFT4)

    schema = dict(_load("config-schema.json"), id=_BASE + "config-schema.json")
    return jsonschema.Draft4Validator(schema, registry=Registry(retrieve=retrieve))  # type: ignore[call-arg]


def validate(spec: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError when ``spec`` is not a valid OCI config."""
    _validator().validate(spec)
