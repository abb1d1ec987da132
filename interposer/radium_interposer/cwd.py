"""The program's working directory, as calls tell it to the worker (``cwd``: remote code
resolves the program's relative paths against it).

Reading it is a system call, and the express lane asks at every call it sends, so it is read
once and again only after the program changes it: :func:`install` wraps ``os.chdir`` and
``os.fchdir`` (what ``contextlib.chdir`` and every Python library call), and a call that goes
the full path reads it afresh (:func:`refresh`), which also catches a change made by C code
behind Python's back at the next such call.
"""

from __future__ import annotations

import functools
import os
from typing import Any, Callable, Optional

__all__ = ["current", "install", "refresh"]

_known: Optional[str] = None
_stale = True


def current() -> Optional[str]:
    """The working directory as last read, read again if the program changed it since (None
    when it was removed: the worker keeps the last one it was told)."""
    return refresh() if _stale else _known


def refresh() -> Optional[str]:
    """The working directory, read now."""
    global _known, _stale
    _stale = False  # before the read: a change racing with it marks it stale again
    try:
        _known = os.getcwd()
    except OSError:  # removed under us
        _known = None
    return _known


def install() -> None:
    """Wrap ``os.chdir`` and ``os.fchdir`` so that a change is read at the next call (once)."""
    for name in ("chdir", "fchdir"):
        original = getattr(os, name, None)
        if original is not None and not getattr(original, "_rd_cwd", False):
            setattr(os, name, _marking(original))


def _marking(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def change(*args: Any, **kwargs: Any) -> Any:
        global _stale
        try:
            return original(*args, **kwargs)
        finally:
            _stale = True

    change._rd_cwd = True  # type: ignore[attr-defined]
    return change
