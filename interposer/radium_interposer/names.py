"""Whether the worker can import a module, and the closest names it can: the ``find`` operation.

``radium exec`` asks before the program runs, once per ``--remote`` module, so a mistyped name
(``nmupy``) is one line naming the closest one (``numpy``) instead of a ``ModuleNotFoundError``
inside the program after a lease was taken. Spec: docs/data-plane.md, "Operations".

- :func:`find` runs on the worker: it looks for the module without importing it (only its parent
  packages are imported, as an import of it would), and on a miss lists the names at the level
  that failed (the top-level modules, or the submodules of the deepest parent found) and keeps
  the closest (``difflib``).
- :func:`ask` runs in ``radium exec``: one connection through the agent's ``dp.sock``, one
  ``find`` per module. The worker runs the tenant's code, so its answer is read as the tenant's
  word: only module-shaped names, a few of them, are kept (they are printed to a terminal).
"""

from __future__ import annotations

import difflib
import importlib.util
import pkgutil
import re
import sys
from typing import Any, Dict, Iterable, List, Optional, Sequence

from radium_interposer import dialing, ops, wire
from radium_interposer.errors import WorkerGone

__all__ = ["LIMITS", "MAX_NAME", "MAX_NEAR", "MODULE", "ask", "find"]

#: The module grammar of RADIUM_REMOTE (split_file._MODULE): a dotted path of identifiers.
MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
MAX_NAME = 256
#: Close names given back at most.
MAX_NEAR = 3
#: What an answer may hold (a few short names): anything larger is refused, not read.
LIMITS = wire.Limits(max_meta=64 << 10, max_buffers=0, max_buffer=0, max_total=0)


def find(name: str) -> Dict[str, Any]:
    """``{"have": True}``, or ``{"have": False, "near": [closest importable names]}``."""
    if not isinstance(name, str) or len(name) > MAX_NAME or not MODULE.match(name):
        raise ValueError(f"find: {name!r} is not a module name")
    parts = name.split(".")
    for depth in range(len(parts), 0, -1):
        spec = _spec(".".join(parts[:depth]))
        if spec is None:
            continue
        if depth == len(parts):
            return {"have": True}
        below = pkgutil.iter_modules(spec.submodule_search_locations or [])
        return {"have": False, "near": _near(parts[:depth], parts[depth], (m.name for m in below))}
    top = {m.name for m in pkgutil.iter_modules()} | set(sys.builtin_module_names)
    return {"have": False, "near": _near([], parts[0], top)}


def _spec(name: str) -> Any:
    try:
        return importlib.util.find_spec(name)
    except Exception:  # a missing or broken parent package: not importable, whatever the cause
        return None


def _near(parent: List[str], word: str, candidates: Iterable[str]) -> List[str]:
    close = difflib.get_close_matches(word, sorted(set(candidates)), n=MAX_NEAR)
    return [".".join([*parent, match]) for match in close]


def ask(path: str, modules: Sequence[str], timeout: float) -> Optional[Dict[str, List[str]]]:
    """The modules of ``modules`` the lease's worker cannot import, each with the closest names
    it can; None when the worker does not know ``find`` (an older bundle: nothing checked).

    ``path``: the runtime directory's ``dp.sock``. WorkerGone when the worker cannot be reached.
    """
    sock = dialing.dial_agent(path, timeout, timeout)
    missing: Dict[str, List[str]] = {}
    try:
        for call_id, module in enumerate(modules, 1):
            wire.send(sock, wire.CALL, call_id, {"op": ops.FIND, "m": module})
            frame = wire.read(sock.recv_into, LIMITS)
            if frame is None:
                raise WorkerGone("the worker closed the connection")
            if frame.type == wire.ERROR:
                error = str(frame.meta.get("error", ""))[:200]
                if "unknown operation" in error:
                    return None
                raise WorkerGone(f"the worker could not look for {module!r}: {error}")
            if frame.meta.get("have") is not True:
                missing[module] = _names(frame.meta.get("near"))
    except (OSError, wire.ProtocolError) as exc:
        raise WorkerGone(f"the connection to the worker failed: {exc}") from None
    finally:
        sock.close()
    return missing


def _names(near: Any) -> List[str]:
    """The worker's close names, as far as they are names at all."""
    if not isinstance(near, list):
        return []
    return [n for n in near if isinstance(n, str) and len(n) <= MAX_NAME and MODULE.match(n)][
        :MAX_NEAR
    ]
