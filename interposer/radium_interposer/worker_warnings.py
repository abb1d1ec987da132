"""The worker's side of warnings: each warning a call raises goes back to its program, whose own
``warnings`` filters decide (docs/remoting.md, "Warnings"; wire: docs/data-plane.md, "Output").

The worker shows every warning (an ``always`` filter in front: the program's filters, not the
worker's, decide what is shown, raised or counted once), and its ``showwarning`` appends each to
the list of the call running in that thread, which the answer carries as ``w``. Library code's
own ``catch_warnings`` blocks (``simplefilter("ignore")``, ``record=True``) keep working on the
worker, as they would locally. A warning outside any call (a background thread of the tenant's)
is written to the worker's log, as before.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from types import FrameType
from typing import Any, Dict, List, Optional

from radium_interposer import reflection

__all__ = ["ACTIONS", "MAX_ENTRIES", "MAX_TEXT", "entry", "filters_of", "install", "record"]

#: Where the interposer's own code is: a warning attributed there is at the program's call.
_OURS = os.path.dirname(os.path.abspath(__file__)) + os.sep
#: Distinct warnings one answer carries at most (consecutive repeats are counted, not listed).
MAX_ENTRIES = 256
#: Characters of a message (and of a source line) kept.
MAX_TEXT = 1 << 16


def install(local: threading.local) -> None:
    """Route the worker's warnings to the calls of the thread that raised them (``local.warned``:
    the running connection's list, set by the worker)."""
    original = warnings.showwarning

    def showwarning(
        message: Any,
        category: Any,
        filename: str,
        lineno: int,
        file: Any = None,
        line: Optional[str] = None,
    ) -> None:
        sink: Optional[List[Dict[str, Any]]] = getattr(local, "warned", None)
        if sink is None or file is not None:  # no call of a client runs here, or it is aimed
            original(message, category, filename, lineno, file, line)
            return
        err = getattr(local, "stderr", None) or []
        record(sink, entry(message, category, filename, lineno, line, sum(map(len, err))))

    warnings.showwarning = showwarning
    warnings.simplefilter("always")


def entry(
    message: Any, category: Any, filename: str, lineno: int, line: Optional[str], offset: int
) -> Dict[str, Any]:
    """One warning as the answer carries it: category by path and nearest builtin warning,
    text, where (None: the program's line that made the call), module, source line, and how
    much of the call's stderr came before it."""
    kind = category if isinstance(category, type) else UserWarning
    path = reflection.class_path(kind) or f"{kind.__module__}.{kind.__qualname__}"
    ours = str(filename).startswith(_OURS)
    module = None if ours else _module_of(str(filename), lineno)
    if module is not None and module.startswith("radium_shipped."):
        module = module[len("radium_shipped.") :]  # the program's own module, by its name
    if line is None and not ours:
        import linecache

        line = linecache.getline(str(filename), lineno) or None
    return {
        "c": path,
        "e": reflection.exception_kind(kind) or "UserWarning",
        "m": str(message)[:MAX_TEXT],
        "f": None if ours else str(filename),
        "l": int(lineno),
        "g": module,
        "s": line[:MAX_TEXT] if line else None,
        "o": offset,
        "n": 1,
    }


def record(sink: List[Dict[str, Any]], new: Dict[str, Any]) -> None:
    """Append ``new``; the same warning again right after itself only counts (a loop)."""
    if sink and {**sink[-1], "n": 1} == new:
        sink[-1]["n"] += 1
    elif len(sink) < MAX_ENTRIES:
        sink.append(new)
    else:  # counted: the client says how many it was not given
        sink[-1]["d"] = sink[-1].get("d", 0) + 1


def _module_of(filename: str, lineno: int) -> Optional[str]:
    """The module the warning is attributed to (what the program's filters match by module):
    the frame on this thread's stack at that file and line, as ``warnings.warn`` found it."""
    frame: Optional[FrameType] = sys._getframe(2)
    while frame is not None:
        if frame.f_lineno == lineno and frame.f_code.co_filename == filename:
            name = frame.f_globals.get("__name__")
            return name if isinstance(name, str) else None
        frame = frame.f_back
    return None


#: The actions of a filter a package may install for its own warnings, as the client accepts.
ACTIONS = ("default", "error", "ignore", "always", "module", "once")


def filters_of(module: str) -> List[List[Any]]:
    """The filters a package installed for its own warning classes (numpy: ``always`` for its
    RankWarning), on the ``import`` of the package itself: the program gets them as a local
    import would give them. Filters with a message or module pattern stay the worker's."""
    if "." in module:
        return []
    found = []
    for action, message, category, where, lineno in warnings.filters:
        owner = str(getattr(category, "__module__", "")).partition(".")[0]
        if not isinstance(category, type) or owner != module:
            continue
        if message is None and where is None and not lineno:
            path = reflection.class_path(category)
            if path is not None and action in ACTIONS:
                found.append([action, path, reflection.exception_kind(category)])
    return found[:16]
