"""Validate CDI specs against the CDI JSON schema.

The schema comes from Debian's golang-github-container-orchestrated-devices-container-device-
interface-dev (RADIUM_CDI_SCHEMA_DIR overrides); when it is missing the test fails and says how
to install it.
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
        "RADIUM_CDI_SCHEMA_DIR",
        "/usr/share/gocode/src/github.com/container-orchestrated-devices/"
        "container-device-interface/schema",
    )
)
PACKAGE = "golang-github-container-orchestrated-devices-container-device-interface-dev"


@lru_cache(maxsize=1)
def _validator() -> jsonschema.protocols.Validator:
    return validator(SCHEMA_DIR, "schema.json", 7, PACKAGE)


def validate(spec: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError when ``spec`` is not a valid CDI spec."""
    _validator().validate(spec)
