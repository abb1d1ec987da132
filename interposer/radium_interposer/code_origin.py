"""Where a piece of code comes from: the program's own (shipped to the worker by source), or
installed (the standard library, site/dist-packages, Radium's bundle: named by import path, the
worker uses its own). One rule for shipping, the program's modules and pickled library objects."""

from __future__ import annotations

import functools
import os
import sys
import sysconfig
import types
from typing import Any, Tuple

__all__ = ["installed", "is_users", "libraries"]


@functools.lru_cache(maxsize=1)
def installed() -> Tuple[str, ...]:
    """Where installed libraries live (site- and dist-packages), not the standard library."""
    paths = {sysconfig.get_paths()[key] for key in ("purelib", "platlib")}
    paths.update(p for p in sys.path if p.endswith(("site-packages", "dist-packages")))
    return tuple(sorted(paths))


@functools.lru_cache(maxsize=1)
def libraries() -> Tuple[str, ...]:
    """Where installed code lives: the standard library, every site/dist-packages, the bundle.
    Read once: it is asked for each class and function that crosses."""
    paths = {sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib")}
    paths.update(installed())
    paths.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the bundle
    return tuple(sorted(paths))


def is_users(obj: Any) -> bool:
    """A class or function of the user's own code: from ``__main__`` or a file outside the
    standard library and the installed packages. (A class on remote bases, which this cannot
    tell from a stand-in: ``shipped_paths.is_users``.)"""
    if not isinstance(obj, (type, types.FunctionType)):
        return False
    module = sys.modules.get(getattr(obj, "__module__", None) or "")
    if module is None or module.__name__ == "__main__":
        return module is not None
    path = getattr(module, "__file__", None)
    return bool(path) and not str(path).startswith(libraries())
