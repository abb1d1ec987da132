"""A JSON-schema validator over a schema directory that a Debian package ships (the OCI
runtime-spec's, CDI's): its files refer to each other by relative name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT4, DRAFT7

_DRAFTS = {
    4: (jsonschema.Draft4Validator, DRAFT4, "id"),
    7: (jsonschema.Draft7Validator, DRAFT7, "$id"),
}


def validator(
    directory: Path, root: str, draft: Literal[4, 7], package: str
) -> jsonschema.protocols.Validator:
    """The validator of ``directory/root``; a missing schema file fails, naming ``package``."""
    cls, specification, id_key = _DRAFTS[draft]

    def load(name: str) -> Any:
        path = directory / name
        if not path.exists():
            raise AssertionError(f"schema {path} is missing: apt-get install {package}")
        return json.loads(path.read_text())

    def retrieve(uri: str) -> Resource[Any]:
        return Resource.from_contents(
            load(uri.rsplit("/", 1)[-1]), default_specification=specification
        )

    schema = {**load(root), id_key: f"file:///schemas/{root}"}
    return cls(schema, registry=Registry(retrieve=retrieve))  # type: ignore[call-arg]
