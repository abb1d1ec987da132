"""What a container asks of Radium: from its environment or from ``radium.io/`` annotations.

Engines differ in what they can pass (docker: env; Kubernetes and podman: annotations), so both
are read, annotations winning. The request is normalised into annotations, which is what the
hook sees in the OCI state.
"""

from __future__ import annotations

from radium.constants import ANNOTATION_PREFIX
from radium.errors import SpecError
from radium.shim.pods import CLAIM, claim_of, is_pod_sandbox, selected

# Not typing.TYPE_CHECKING: importing typing costs milliseconds on every container start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping, Optional

__all__ = [
    "FIELDS",
    "MAX_WAIT",
    "NOTHING_SET",
    "PRIORITIES",
    "ImageSet",
    "allocation",
    "checked",
    "env_map",
    "from_spec",
    "wait_seconds",
]

#: The longest a container start may wait for capacity, in seconds.
MAX_WAIT = 3600.0


def _whole(value: str) -> bool:
    return value.isdigit()


def _fraction(value: str) -> bool:
    try:
        return 0.0 < float(value) <= 1.0
    except ValueError:
        return False


def _positive(value: str) -> bool:
    return value.isdigit() and int(value) > 0


def _seconds(value: str) -> bool:
    try:
        return 0.0 <= float(value) <= MAX_WAIT
    except ValueError:
        return False


def _any(value: str) -> bool:
    return True


def _worker(value: str) -> bool:
    return value in ("process", "container")


#: The pool's priority classes (radium.pool.model.PRIORITY_CLASSES, not imported: the hook
#: reads this module on every container start).
PRIORITIES = ("inference", "build", "train", "batch")


def _priority(value: str) -> bool:
    return value in PRIORITIES


#: request key -> (environment variable, validity check, what a valid value looks like)
FIELDS: dict[str, tuple[str, Callable[[str], bool], str]] = {
    "gpus": ("RADIUM_GPUS", _whole, "a whole number of GPUs (0 or more)"),
    "fraction": ("RADIUM_FRACTION", _fraction, "a GPU fraction in (0, 1]"),
    "memory": ("RADIUM_MEMORY", _positive, "GPU memory in MiB (a positive whole number)"),
    "queue": ("RADIUM_QUEUE", _any, "a queue name"),
    "priority": (
        "RADIUM_PRIORITY",
        _priority,
        "a priority class: inference or build (never preempted), train or batch",
    ),
    "wait": (
        "RADIUM_WAIT",
        _seconds,
        f"seconds to wait for capacity, 0 to {MAX_WAIT:.0f} (queued fairly, may reclaim)",
    ),
    "remote": ("RADIUM_REMOTE", _any, "comma-separated module names"),
    "split": ("RADIUM_SPLIT", _any, "a split file path"),
    "image": ("RADIUM_IMAGE", _any, "the container's image reference"),
    "worker": ("RADIUM_WORKER", _worker, '"process" or "container"'),
}


_VARIABLES = frozenset(variable for variable, _, _ in FIELDS.values())

#: What a claim's lease is already decided by: a container with a claim asks none of these.
_AMOUNTS = ("gpus", "fraction", "memory", "queue", "priority", "wait", "worker", "image")


def checked(key: str, value: object, source: str) -> str:
    """``value`` for the request field ``key``, stripped; a ``SpecError`` naming ``source`` when
    invalid."""
    _, valid, expected = FIELDS[key]
    if not isinstance(value, str) or not valid(value.strip()):
        raise SpecError(f"{source} must be {expected}, got {value!r}")
    return value.strip()


class ImageSet:
    """What the image itself set, as the engine recorded it: its ``ENV`` (``env``) and the
    annotations the engine merges from it into the spec (``annotations``; podman's manifest
    annotations). A plain class: no dataclasses import on the container start path."""

    __slots__ = ("annotations", "engine", "env")

    def __init__(self, engine: str, env: Mapping[str, str], annotations: Mapping[str, str]):
        self.engine = engine
        self.env = env
        self.annotations = annotations


#: No image set anything: every value in the spec is the user's (a spec written by hand, and
#: the "may this container ask anything" question the fronts and ``delete`` ask).
NOTHING_SET = ImageSet("none", {}, {})


def _env_map(spec: Mapping[str, Any]) -> dict[str, str]:
    process = spec.get("process")
    env = process.get("env") if isinstance(process, dict) else None
    return env_map(env, "RADIUM_")


def env_map(env: object, prefix: str = "") -> dict[str, str]:
    """``NAME=value`` entries of an env list as a dict (names starting with ``prefix``)."""
    if not isinstance(env, list):
        return {}
    pairs = (item.split("=", 1) for item in env if isinstance(item, str) and "=" in item)
    return {k: v for k, v in pairs if k.startswith(prefix)}


def _users(
    values: Mapping[str, Any], image: Mapping[str, str], what: str, notes: list[str]
) -> dict[str, Any]:
    """``values`` less those equal to what the image set (the user cannot have typed them, or
    typed the image's own value: the same either way, and the image's is the safe reading)."""
    kept = {}
    for name, value in values.items():
        if image.get(name) == value:
            notes.append(f"{name}={value} is the image's {what} (or equal to it): ignored")
        else:
            kept[name] = value
    return kept


def _untrusted_env(env: dict[str, str], asked: bool, notes: list[str]) -> None:
    """The engine's record was not found: its env may be the image's, so it never asks."""
    if not env:
        return
    names = ", ".join(sorted(env))
    if asked:
        notes.append(f"{names} ignored: under this engine the environment may be the image's")
        return
    first = sorted(env)[0]
    key = next(k for k, (variable, _, _) in FIELDS.items() if variable == first)
    raise SpecError(
        f"{names} in the container's environment cannot be told from the image's ENV under "
        "this engine (Radium reads docker's and podman's image records only)",
        hint=f"ask with the annotation {ANNOTATION_PREFIX}{key}=... instead (ctr run "
        "--annotation, a pod annotation, podman --annotation, config.json annotations), "
        "or use docker (radium run)",
    )


def from_spec(
    spec: Mapping[str, Any], image: Optional[ImageSet], notes: Optional[list[str]] = None
) -> Optional[dict[str, str]]:
    """The request as ``radium.io/`` annotations, or None when the container asks nothing.

    Only what the user set for this container may ask: a ``RADIUM_*`` variable or a
    ``radium.io/`` annotation equal to what ``image`` set is dropped (and said in ``notes``).
    ``image`` None means the engine's record of the image was not found: annotations ask,
    the environment does not, and a request made only in it is refused with a SpecError.
    A pod's sandbox and a container that ``radium.io/containers`` leaves out ask nothing.
    """
    notes = [] if notes is None else notes
    raw_annotations = spec.get("annotations")
    annotations = raw_annotations if isinstance(raw_annotations, dict) else {}
    if is_pod_sandbox(annotations):
        return None
    claim = claim_of(annotations)
    if claim is None and not selected(annotations):
        return None
    annotations = {
        k: v
        for k, v in annotations.items()
        if isinstance(k, str) and k.startswith(ANNOTATION_PREFIX)
    }
    env = {k: v for k, v in _env_map(spec).items() if k in _VARIABLES}
    if image is None:
        _untrusted_env(env, bool(annotations), notes)
        env = {}
    else:
        annotations = _users(annotations, image.annotations, "annotation", notes)
        env = _users(env, image.env, "ENV", notes)
    request: dict[str, str] = {}
    for key, (variable, _, _) in FIELDS.items():
        annotation = ANNOTATION_PREFIX + key
        value = annotations.get(annotation, env.get(variable))
        if value is not None:
            source = annotation if annotation in annotations else variable
            request[annotation] = checked(key, value, source)
    others = {k: v for k, v in annotations.items() if k not in request}
    if claim is not None:
        amounts = [
            f"{ANNOTATION_PREFIX}{key}" for key in _AMOUNTS if ANNOTATION_PREFIX + key in request
        ]
        if amounts:
            raise SpecError(
                f"{amounts[0]} and the container's DRA claim both ask for a device",
                hint="ask one way: the claim (its ResourceClaim) or the annotations",
            )
        request[CLAIM] = claim
    if not request and not others:
        return None
    return {**others, **request}


def wait_seconds(request: Mapping[str, str]) -> float:
    """The seconds ``request`` (annotations) may wait for capacity; 0 when it names none or a
    malformed one (the agent's :func:`allocation` refuses that with its reason)."""
    value = request.get(ANNOTATION_PREFIX + "wait", "")
    return float(value) if _seconds(value) else 0.0


def allocation(request: Mapping[str, str]) -> Optional[dict[str, Any]]:
    """Pool Allocate arguments for a request's ``radium.io/`` annotations.

    None when no device is asked for (``gpus`` 0 and no fraction or memory). A request naming
    no amount at all (say, only a remote module) asks for one whole GPU. Checked like
    :func:`from_spec`, because in hooks.d mode the annotations reach the agent unchecked.
    """
    values = {
        key: checked(key, request[ANNOTATION_PREFIX + key], ANNOTATION_PREFIX + key)
        for key in ("gpus", "fraction", "memory", "queue", "priority", "wait", "image", "worker")
        if ANNOTATION_PREFIX + key in request
    }
    fraction = float(values.get("fraction", 0))
    memory = int(values.get("memory", 0))
    if "gpus" in values:
        gpus = int(values["gpus"])
        if gpus == 0 and not (fraction or memory):
            return None
    else:
        gpus = 0 if fraction or memory else 1
    return {
        "gpus": gpus,
        "fraction": fraction,
        "memory_mib": memory,
        "queue": values.get("queue", ""),
        "priority": values.get("priority", ""),
        "wait_seconds": float(values.get("wait", 0)),
        "image": values.get("image", ""),
        "worker": values.get("worker", ""),
    }
