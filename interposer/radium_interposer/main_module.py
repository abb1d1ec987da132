"""Split-file functions of the program's main module: ``python train.py`` and
``python -m pkg.train`` (docs/remoting.md, "Split files").

The main module is not imported, so the finder cannot wrap its functions. Instead a trace
function watches the main module's top-level code only: after each of its statements, a listed
function that has just been defined is replaced by its remote stand-in, before the next statement
can call it. When every listed function is wrapped (or the module has none) tracing stops, so a
program pays for it only while its main module defines its functions.
"""

from __future__ import annotations

import functools
import os
import sys
import types
from typing import Any, Callable, Dict, List, Optional, Set

__all__ = ["Tracer", "Wrap", "identity", "stand_in", "watch"]


Wrap = Callable[[Any], Any]
Tracer = Callable[[types.FrameType, str, Any], Any]


def _warn(text: str) -> None:
    # Not the logging module: it costs every remoted Python's start a few milliseconds, and the
    # program's own handlers are not ours to write to (boot's messages go the same way).
    sys.stderr.write(f"radium: {text}\n")


def identity(namespace: Dict[str, Any]) -> str:
    """The name the user knows the main module by: ``pkg.train`` under ``-m``, ``train`` for
    ``python train.py`` (the file's stem), else ``__main__``."""
    spec = namespace.get("__spec__")
    if spec is not None and getattr(spec, "name", None):
        return str(spec.name)
    path = namespace.get("__file__")
    return os.path.splitext(os.path.basename(str(path)))[0] if path else "__main__"


def watch(functions: Dict[str, List[str]], wrap: Wrap) -> None:
    """Wrap the listed functions of the main module, when it runs, as it defines them."""
    if not functions:
        return

    def on_call(frame: types.FrameType, event: str, arg: Any) -> Optional[Tracer]:
        if frame.f_code.co_name != "<module>" or frame.f_globals.get("__name__") != "__main__":
            return None
        wanted = set(functions.get(identity(frame.f_globals), []))
        wanted.update(functions.get("__main__", []))
        if not wanted:
            sys.settrace(None)
            return None
        return _statement_watcher(frame.f_globals, wanted, wrap)

    sys.settrace(on_call)


def _statement_watcher(namespace: Dict[str, Any], wanted: Set[str], wrap: Wrap) -> Tracer:
    """The main module frame's tracer: each line event comes after the previous statement."""

    def on_line(frame: types.FrameType, event: str, arg: Any) -> Optional[Tracer]:
        for name in [n for n in wanted if n in namespace]:
            wanted.discard(name)
            local = namespace[name]
            if isinstance(local, types.FunctionType) and local.__module__ == "__main__":
                namespace[name] = wrap(local)
            else:
                kind = type(local).__name__
                _warn(f"split entry {name} is a {kind}, not a function: not remoted")
        if event == "return":
            for name in sorted(wanted):
                _warn(f"split entry {name}: the main module defines no such function")
            wanted.clear()
        if wanted:
            return on_line
        sys.settrace(None)
        return None

    return on_line


def stand_in(local: Any, call: Callable[..., Any]) -> Any:
    """``local``'s remote stand-in: same name, signature and docs; calling it runs ``call``."""

    @functools.wraps(local)
    def remote(*args: Any, **kwargs: Any) -> Any:
        return call(*args, **kwargs)

    remote.__radium_remote__ = True  # type: ignore[attr-defined]
    return remote
