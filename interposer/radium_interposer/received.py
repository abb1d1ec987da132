"""What a client takes from a worker's word: modules and classes it names resolve to what the
program itself imported or remoted, never to a local import (docs/data-plane.md, "Values").

A worker is not trusted with code in its client: a compromised one could plant ``pwnmod.py``
in the program's directory through the client's file service, then name the module in a value.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any, Callable

from radium_interposer import structs

__all__ = ["module_named", "remoted"]


def _none_remoted(name: str) -> bool:
    return False


#: Whether a module name is one the program remoted (the finder's: served by the worker, so
#: importing it runs nothing here). Set by :func:`radium_interposer.finder.install`.
remoted: Callable[[str], bool] = _none_remoted


def module_named(name: Any) -> types.ModuleType:
    """The module a worker names (``{"$": "m"}``): one this program imported, or one it
    remoted (imported through the finder, from the worker); DecodeError for any other."""
    module = sys.modules.get(name) if isinstance(name, str) else None
    if module is None and isinstance(name, str) and _remoted_all_the_way(name):
        module = importlib.import_module(name)
    if not isinstance(module, types.ModuleType):
        raise structs.DecodeError(
            f"radium: the worker sent a reference to module {name!r}, which this program has "
            "neither imported nor remoted: refused (a worker may not make it import code)"
        )
    return module


def _remoted_all_the_way(name: str) -> bool:
    """Every package on the way to ``name`` is imported already or remoted, so importing it
    loads nothing from this side's files."""
    parts = name.split(".")
    if not all(part.isidentifier() for part in parts):
        return False
    prefixes = (".".join(parts[:n]) for n in range(1, len(parts) + 1))
    return all(prefix in sys.modules or remoted(prefix) for prefix in prefixes)
