"""Whether a call's arguments may name a file: such a call waits, so a missing file raises at
the call, as locally (docs/remoting.md, "Files")."""

from __future__ import annotations

import os
from typing import Any, Dict, Set, Tuple

__all__ = ["may_name_a_file"]

#: Types of arguments that never name a file (checked first: most arguments are these), and
#: those found so since (a proxy's class, a local class): asked of the ABC once per type.
_NOT_PATHS = frozenset((int, float, bool, type(None), complex, bytes))
_pathless: Set[type] = set()
_MAX_PATHLESS = 1024


def may_name_a_file(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> bool:
    """A path, or a string that looks like one (a directory or a suffix: "ckpt.pt"). Device,
    dtype and mode strings ("cuda:0", "mean", "ij,jk->ik") do not, and keep pipelining."""
    for values in (args, kwargs.values()) if kwargs else (args,):
        for a in values:  # a loop, not any(): this runs for every pipelined call
            kind = type(a)
            if kind in _NOT_PATHS or kind in _pathless:
                continue
            if isinstance(a, str):
                if "/" in a or "." in a:
                    return True
            elif isinstance(a, os.PathLike):  # an ABC: ~1 us, so asked once per type
                return True
            elif len(_pathless) < _MAX_PATHLESS:
                _pathless.add(kind)
    return False
