"""Validate config.json documents against the OCI runtime-spec JSON schema.

The schema comes from Debian's golang-github-opencontainers-specs-dev (RADIUM_OCI_SCHEMA_DIR
overrides); when it is missing the test fails and says how to install it.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema

from tests.json_schema import validator

SCHEMA_DIR = Path(
    os.environ.get(
        "RADIUM_OCI_SCHEMA_DIR",
        "/usr/share/gocode/src/github.com/opencontainers/runtime-spec/schema",
    )
)


@lru_cache(maxsize=1)
def _validator() -> jsonschema.protocols.Validator:
    return validator(SCHEMA_DIR, "config-schema.json", 4, "golang-github-opencontainers-specs-dev")


def validate(spec: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError when ``spec`` is not a valid OCI config."""
    _validator().validate(spec)
