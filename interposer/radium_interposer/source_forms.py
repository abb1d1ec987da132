"""Functions compiled from source the interposer writes (worker_forms, express_forms): named
inside the package, so every "is this frame ours?" test says yes, and with their source in
``linecache``, so a traceback through one shows the line that ran."""

from __future__ import annotations

import os
from typing import Any, Dict

__all__ = ["factory"]

_HERE = os.path.dirname(os.path.abspath(__file__))
_made = 0


def factory(source: str, kind: str, scope: Dict[str, Any]) -> Any:
    """Run ``source`` (which defines ``factory``) in ``scope``; its ``factory``. The caller's
    source must hold only what it wrote itself: indices and fixed names, never a peer's text."""
    import linecache  # not at start: it loads tokenize, and most programs compile no form early

    global _made
    _made += 1
    name = os.path.join(_HERE, f"<{kind} {_made}>")
    # mtime None: linecache.checkcache never drops it (there is no file to compare with).
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    exec(compile(source, name, "exec"), scope)
    return scope["factory"]
