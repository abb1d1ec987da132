"""Classes and functions of the program nested in its classes (``TestX.Sub``,
``TestX.helper``), shipped alone (docs/remoting.md, "Nested classes").

Their source defines them at the top of a namespace, where ``Sub`` could clobber a top-level
``Sub`` of the program and ``radium_shipped.__main__.TestX.Sub`` would not resolve (``TestX``
itself need not be shipped). So the worker defines each apart (its own names as locals, the
namespace as globals) and keeps it in a tree of its own in the namespace, under
``__radium_nested__`` and its qualified name: ``radium_shipped.__main__.__radium_nested__.
TestX.Sub``, a path the worker resolves like any other. It keeps its ``__qualname__``
(``TestX.Sub``) for reprs and messages, and the name its instances are known by is
``radium_shipped.__main__.TestX.Sub`` (module and qualname), as for any class.

This module runs on both sides: the client computes the same paths the worker makes.
"""

from __future__ import annotations

import sys
import types
from typing import Any, Callable, Dict, Optional

__all__ = [
    "HOLDER",
    "define",
    "in_outer",
    "local_message",
    "type_name",
    "worker_path",
]

#: The attribute of a shipped namespace holding its nested definitions (no program name
#: starts with it: it is a dunder of ours).
HOLDER = "__radium_nested__"


def worker_path(namespace: str, qualname: str) -> str:
    """Where the worker keeps a definition of ``qualname`` shipped into ``namespace``."""
    if "." not in qualname:
        return f"{namespace}.{qualname}"
    return f"{namespace}.{HOLDER}.{qualname}"


def type_name(kind: type) -> str:
    """How the worker names its object's type to the client: by the path of a shipped class
    defined apart (two classes of one function share a qualname, never a path), else
    ``module.qualname``."""
    path = kind.__dict__.get("__radium_path__")
    return path if isinstance(path, str) else f"{kind.__module__}.{kind.__qualname__}"


def local_message(obj: Any) -> Optional[str]:
    """Why a definition cannot be shipped because it is local to a function (else None)."""
    qualname = str(getattr(obj, "__qualname__", ""))
    if "<locals>" not in qualname:
        return None
    kind = "class" if isinstance(obj, type) else "function"
    return (
        f"{qualname}: a {kind} defined inside a function cannot run on the worker (it exists "
        f"only while that function runs); define it at the top level of its module or in a class"
    )


def in_outer(obj: Any, place: Callable[[type], Optional[str]]) -> Optional[str]:
    """The worker path of a nested definition whose outer class is on the worker, or goes
    there now (``place``: its path, shipping a class on remote bases first): the outer's body
    defined it there too, so it is one class, not two. None otherwise. Reads namespaces only."""
    *outer_names, name = str(getattr(obj, "__qualname__", "")).split(".")
    found: Any = sys.modules.get(str(getattr(obj, "__module__", "")))
    for part in outer_names:
        if not isinstance(found, (type, types.ModuleType)):
            return None
        found = vars(found).get(part)
    if not outer_names or not isinstance(found, type):
        return None
    inner = vars(found).get(name)
    if getattr(inner, "__func__", inner) is not obj:
        return None
    outer_path = place(found)
    return None if outer_path is None else f"{outer_path}.{name}"


def define(module: types.ModuleType, qualname: str, code: Any, key: str = "") -> None:
    """Run one nested definition's code (the worker) and keep it at its path: under ``key``
    (a local class's own, ``f.<locals3>.Sub``), else its qualname."""
    key = key or qualname
    scope: Dict[str, Any] = {}
    exec(code, module.__dict__, scope)  # a class body's names stay out of the module
    if not scope:
        raise ValueError(f"ship: the definition of {qualname} defines nothing")
    made = list(scope.values())[-1]
    made = getattr(made, "__func__", made)  # a staticmethod or classmethod's function
    _rename(made, qualname)
    node = module.__dict__.setdefault(HOLDER, types.SimpleNamespace())
    *outer, name = key.split(".")
    for part in outer:
        node = vars(node).setdefault(part, types.SimpleNamespace())
    setattr(node, name, made)
    if isinstance(made, type):  # how this side names the class: the path that resolves
        made.__radium_path__ = worker_path(module.__name__, key)  # type: ignore[attr-defined]


def _rename(obj: Any, qualname: str) -> None:
    """``obj`` and what its body defines take their qualified names back (``TestX.Sub``,
    ``TestX.Sub.method``): reprs, pickles and messages name them as the program does."""
    old = str(getattr(obj, "__qualname__", ""))
    try:
        obj.__qualname__ = qualname
    except (AttributeError, TypeError):
        return
    if not isinstance(obj, type):
        return
    for value in list(vars(obj).values()):
        inner = getattr(value, "__func__", value)
        if isinstance(inner, (type, types.FunctionType)) and inner.__qualname__.startswith(
            f"{old}."
        ):
            _rename(inner, qualname + inner.__qualname__[len(old) :])
