"""How the worker names things to the client: objects by import path, a module's directory
entries, exceptions. Spec: docs/data-plane.md ("Values", "Operations", "Exceptions")."""

from __future__ import annotations

import importlib
import traceback
import types
from typing import Any, Dict, List

from radium_interposer import codec, reflection
from radium_interposer.errors import LeasePreempted

__all__ = ["directory_entry", "error_meta", "live_attributes", "method_names", "resolve_path"]

_resolved: Dict[str, Any] = {}


def resolve_path(path: str) -> Any:
    """``numpy.linalg.inv``: import the longest importable prefix, then walk attributes.

    Cached: a failed import of ``operator.add`` searches all of sys.path, on every call.
    """
    found = _resolved.get(path)
    if found is None:
        found = _resolved[path] = _resolve_uncached(path)
    return found


def _resolve_uncached(path: str) -> Any:
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        name = ".".join(parts[:cut])
        try:
            obj = importlib.import_module(name)
        except ImportError:
            if cut == 1:
                raise
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(path)


def directory_entry(value: Any) -> Any:
    """How an import's directory describes one attribute: a plain value, a module, a class (by
    its own import path; 1 when an exception class), or anything else ("f": a path proxy)."""
    if isinstance(value, types.ModuleType):
        return "m"
    if isinstance(value, type):
        path = reflection.class_path(value)
        if path is not None:
            return ["c", path, reflection.exception_kind(value)]
    if isinstance(value, codec.SCALARS):
        return ["v", value]
    return "f"


def live_attributes(module: types.ModuleType) -> List[str]:
    """The settable properties of a module's own class (``torch.backends.cudnn``'s flags are
    properties of a ModuleType subclass): read and written on the worker at each use, as no
    snapshot of them holds, and absent from ``dir(module)``."""
    names: List[str] = []
    for klass in type(module).__mro__:
        if klass is types.ModuleType:
            break
        for name, value in vars(klass).items():
            if not name.startswith("_") and hasattr(type(value), "__set__"):
                names.append(name)
    return names


def method_names(kind: type) -> List[str]:
    """The attributes of ``kind`` the client may reach as methods without a round trip (the
    ``methods`` operation): its callables, but not its classes (``dtype.type`` is
    ``np.int64``): the client asks for those, to get the class itself, with its identity."""
    names = []
    for name in dir(kind):
        value = getattr(kind, name, 0)
        if not name.startswith("__") and callable(value) and not isinstance(value, type):
            names.append(name)
    return names


def error_meta(error: BaseException) -> Dict[str, Any]:
    """A worker-side exception as its reply describes it, for the client to raise."""
    kind = type(error)
    args = list(error.args) if codec.is_plain(list(error.args)) else None
    token = getattr(error, "radium_client_token", None)
    return {
        **({"cx": token} if isinstance(token, str) else {}),
        "error": f"{kind.__name__}: {error}",
        "type": kind.__qualname__,
        "module": kind.__module__,
        "builtin": reflection.exception_kind(kind),
        "args": codec.encode(args, [], lambda _: None) if args is not None else None,
        # A notice from Radium itself has no remote code to point at.
        "tb": ""
        if isinstance(error, LeasePreempted)
        else "".join(traceback.format_exception(kind, error, error.__traceback__)),
    }
