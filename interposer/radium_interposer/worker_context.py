"""What the client program's code sees of its own process while it runs on the worker: its
output goes back to the caller's terminal (:class:`Capture`, the worker's ``sys.stdout`` and
``sys.stderr``), and its argv and allowed environment are the program's (meta key ``ctx``,
:func:`apply_context`). Spec: docs/data-plane.md.
"""

from __future__ import annotations

import io
import os
import sys
import threading
from typing import Any

__all__ = ["Capture", "apply_context"]


class Capture(io.TextIOBase):
    """sys.stdout/stderr of the worker: output of a call goes back to the caller's terminal."""

    def __init__(self, real: Any, stream: str, local: threading.local) -> None:
        self.real, self.stream, self.local = real, stream, local

    def write(self, text: str) -> int:
        sink = getattr(self.local, self.stream, None)
        if sink is None:
            return int(self.real.write(text))
        sink.append(text)
        return len(text)

    def flush(self) -> None:
        self.real.flush()


def apply_context(context: Any) -> None:
    """The client program's argv and allowed environment, for its own functions to see."""
    if not isinstance(context, dict):
        raise ValueError("ctx must be a mapping")
    argv, env = context.get("argv", []), context.get("env", {})
    if not isinstance(argv, list) or not all(isinstance(arg, str) for arg in argv):
        raise ValueError("ctx.argv must be a list of strings")
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and k and "=" not in k and "\0" not in k + v
        for k, v in env.items()
    ):
        raise ValueError("ctx.env must map variable names to strings")
    sys.argv[:] = argv
    os.environ.update(env)
