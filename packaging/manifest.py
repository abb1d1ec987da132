"""Reading an installed bundle's manifest: what the hook needs on every start, nothing more."""

from __future__ import annotations

import json
import os

from radium.errors import NoBundleError

# Not typing.TYPE_CHECKING: importing typing costs milliseconds on every container start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Union

    PathLike = Union[str, "os.PathLike[str]"]

__all__ = ["FORMAT", "MANIFEST", "PYTHON_DIR", "read"]

MANIFEST = "manifest.json"
FORMAT = 1
PYTHON_DIR = "python"


def read(bundle_dir: PathLike) -> dict[str, Any]:
    """The manifest of an installed bundle; NoBundleError when missing or unreadable."""
    path = os.path.join(bundle_dir, MANIFEST)
    name = os.path.basename(os.fspath(bundle_dir))
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError as exc:
        raise NoBundleError(
            f"Radium bundle {name} is not installed (no {path})",
            hint="build it with 'radium bundles build' or fix bundles.dir in the config",
        ) from exc
    except (OSError, ValueError) as exc:
        raise NoBundleError(
            f"Radium bundle manifest {path} is unreadable: {exc}",
            hint="rebuild it with 'radium bundles build'",
        ) from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise NoBundleError(
            f"{path} is not a format-{FORMAT} Radium bundle manifest",
            hint="rebuild it with 'radium bundles build'",
        )
    return data
