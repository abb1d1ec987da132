"""Read and write a bundle's config.json, keeping every field and the file's mode.

On the path of every container start: imports nothing but ``os`` and ``json``.
"""

from __future__ import annotations

import json
import os

from radium.errors import SpecError

# Not typing.TYPE_CHECKING: importing typing costs milliseconds on every container start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Union

    PathLike = Union[str, "os.PathLike[str]"]

__all__ = ["MAX_CONFIG_BYTES", "parse_object", "read", "write"]

MAX_CONFIG_BYTES = 16 << 20


def read(bundle: PathLike) -> dict[str, Any]:
    """The bundle's config.json as a dict (unknown fields kept)."""
    path = os.path.join(bundle, "config.json")
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError as exc:
        raise SpecError(f"{path} does not exist", hint="check the bundle path") from exc
    except OSError as exc:
        raise SpecError(f"cannot read {path}: {exc.strerror}") from exc
    if len(raw) > MAX_CONFIG_BYTES:
        raise SpecError(f"{path} is larger than 16 MiB")
    return parse_object(raw, path, hint="fix or regenerate the bundle")


def parse_object(raw: bytes, what: str, hint: str = "") -> dict[str, Any]:
    """``raw`` as a JSON object; SpecError naming ``what`` otherwise."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise SpecError(f"{what} is not valid JSON: {exc}", hint=hint) from exc
    if not isinstance(data, dict):
        raise SpecError(f"{what} is not a JSON object", hint=hint)
    return data


def write(bundle: PathLike, spec: dict[str, Any]) -> None:
    """Replace config.json atomically: a reader sees the old or the new file, never half."""
    path = os.path.join(bundle, "config.json")
    mode = os.stat(path).st_mode & 0o7777
    tmp = f"{path}.radium-{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(spec, f, separators=(",", ":"))
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
