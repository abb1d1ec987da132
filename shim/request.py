"""What a container asks of Radium: from its environment or from ``radium.io/`` annotations.

Engines differ in what they can pass (docker: env; Kubernetes and podman: annotations), so both
are read, annotations winning. The request is normalised into annotations, which is what the
hook sees in the OCI state.
"""

from __future__ import annotations

from radium.errors import SpecError

# Not typing.TYPE_CHECKING: importing typing costs milliseconds on every container start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping, Optional

ANNOTATION_PREFIX = "radium.io/"


def _whole(value: str) -> bool:
    return value.isdigit()


def _fraction(value: str) -> bool:
    try:
        return 0.0 < float(value) <= 1.0
    except ValueError:
        return False


def _positive(value: str) -> bool:
    return value.isdigit() and int(value) > 0


def _any(value: str) -> bool:
    return True


#: request key -> (environment variable, validity check, what a valid value looks like)
FIELDS: dict[str, tuple[str, Callable[[str], bool], str]] = {
    "gpus": ("RADIUM_GPUS", _whole, "a whole number of GPUs (0 or more)"),
    "fraction": ("RADIUM_FRACTION", _fraction, "a GPU fraction in (0, 1]"),
    "memory": ("RADIUM_MEMORY", _positive, "GPU memory in MiB (a positive whole number)"),
    "queue": ("RADIUM_QUEUE", _any, "a queue name"),
    "remote": ("RADIUM_REMOTE", _any, "comma-separated module names"),
    "split": ("RADIUM_SPLIT", _any, "a split file path"),
}


def _env_map(spec: Mapping[str, Any]) -> dict[str, str]:
    process = spec.get("process")
    env = process.get("env") if isinstance(process, dict) else None
    if not isinstance(env, list):
        return {}
    pairs = (item.split("=", 1) for item in env if isinstance(item, str) and "=" in item)
    return {k: v for k, v in pairs if k.startswith("RADIUM_")}


def from_spec(spec: Mapping[str, Any]) -> Optional[dict[str, str]]:
    """The request as ``radium.io/`` annotations, or None when the container asks nothing."""
    raw_annotations = spec.get("annotations")
    annotations = raw_annotations if isinstance(raw_annotations, dict) else {}
    env = _env_map(spec)
    request: dict[str, str] = {}
    for key, (variable, valid, expected) in FIELDS.items():
        annotation = ANNOTATION_PREFIX + key
        value = annotations.get(annotation, env.get(variable))
        if value is None:
            continue
        if not isinstance(value, str) or not valid(value.strip()):
            source = annotation if annotation in annotations else variable
            raise SpecError(f"{source} must be {expected}, got {value!r}")
        request[annotation] = value.strip()
    others = {
        k: v
        for k, v in annotations.items()
        if isinstance(k, str) and k.startswith(ANNOTATION_PREFIX) and k not in request
    }
    if not request and not others:
        return None
    return {**others, **request}
