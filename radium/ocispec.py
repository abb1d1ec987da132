"""Read and write a bundle's config.json, keeping every field and the file's mode."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from radium.errors import SpecError

MAX_CONFIG_BYTES = 16 << 20


def read(bundle: Path) -> dict[str, Any]:
    """The bundle's config.json as a dict (unknown fields kept)."""
    path = bundle / "config.json"
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError as exc:
        raise SpecError(f"{path} does not exist", hint="check the bundle path") from exc
    except OSError as exc:
        raise SpecError(f"cannot read {path}: {exc.strerror}") from exc
    if len(raw) > MAX_CONFIG_BYTES:
        raise SpecError(f"{path} is larger than 16 MiB")
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise SpecError(
            f"{path} is not valid JSON: {exc}", hint="fix or regenerate the bundle"
        ) from exc
    if not isinstance(data, dict):
        raise SpecError(f"{path} is not a JSON object")
    return data


def write(bundle: Path, spec: dict[str, Any]) -> None:
    """Replace config.json atomically: a reader sees the old or the new file, never half."""
    path = bundle / "config.json"
    mode = os.stat(path).st_mode & 0o7777
    fd, tmp = tempfile.mkstemp(prefix=".config.json.", dir=bundle)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(spec, f, separators=(",", ":"))
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
