"""Looking at classes and modules without importing or running anything of theirs: the import
path a class is named by, the builtin exception a stand-in derives from, what a module or class
defines itself, whether a module is a remote one's stand-in. Both sides ask it of what crosses
(the values of :mod:`radium_interposer.structs`, classes, exceptions, warnings).
"""

from __future__ import annotations

import sys
import types
from typing import Any, Optional

__all__ = ["class_path", "exception_kind", "own_attribute", "remote_module"]


def remote_module(module: Any) -> bool:
    """Whether a module is the client's stand-in of a remote one (finder.RemoteModule). Asked
    of its type: a missing attribute of a real module runs its ``__getattr__`` (numpy's
    formats and raises an error, ~2 us, on every call that looked)."""
    return bool(getattr(type(module), "__radium_remote__", False))


def own_attribute(owner: Any, name: str) -> Any:
    """``owner.name`` as the module or class itself defines it (None otherwise): nothing runs,
    not a module's ``__getattr__`` (which may import) nor a descriptor."""
    if isinstance(owner, (types.ModuleType, type)):
        return vars(owner).get(name)
    return None


def exception_kind(cls: type) -> Any:
    """0 for a class that is no exception; else its nearest builtin exception's name (what a
    stand-in of it derives from, so ``except RuntimeError`` still catches it)."""
    if not issubclass(cls, BaseException):
        return 0
    for base in cls.__mro__:
        if base.__module__ == "builtins":
            return base.__name__
    return "Exception"


def class_path(cls: type) -> Optional[str]:
    """``module.qualname`` when that path leads back to ``cls`` here, else None."""
    known = cls.__dict__.get("__radium_path__")
    if isinstance(known, str):
        return known
    module, qualname = getattr(cls, "__module__", None), getattr(cls, "__qualname__", "")
    if not isinstance(module, str) or not isinstance(qualname, str) or "<locals>" in qualname:
        return None
    found: Any = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return f"{module}.{qualname}" if found is cls else None
