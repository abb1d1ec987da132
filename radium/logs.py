"""Logging for entry points: details to a log file, one line per error to stderr.

Only entry points call :func:`setup`; library modules just use ``logging.getLogger(__name__)``.
Nothing here ever writes to stdout: it belongs to runc, containerd or the container.
"""

from __future__ import annotations

import logging
import os
import sys

__all__ = ["setup"]

_FILE_FORMAT = "%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"


class _OneLine(logging.Formatter):
    """``program: message`` with no traceback: users get one line, the log file gets the rest."""

    def __init__(self, program: str) -> None:
        super().__init__()
        self._program = program

    def format(self, record: logging.LogRecord) -> str:
        return f"{self._program}: {record.getMessage()}".replace("\n", " ")


def setup(program: str, log_file: str, *, stderr_level: int = logging.ERROR) -> None:
    """Send records to ``log_file`` (best effort) and errors to stderr as ``program: message``."""
    # grpc's C core writes its own lines to stderr (a refused TLS handshake, at info level):
    # only its errors, which the calls also report through our one line.
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    root = logging.getLogger()
    root.setLevel(logging.DEBUG if os.environ.get("RADIUM_DEBUG") else logging.INFO)
    for handler in list(root.handlers):
        root.removeHandler(handler)
    console = logging.StreamHandler(sys.stderr)
    console.setLevel(stderr_level)
    console.setFormatter(_OneLine(program))
    root.addHandler(console)
    if not log_file:
        return
    try:
        os.makedirs(os.path.dirname(log_file) or ".", exist_ok=True)
        handler = logging.FileHandler(log_file, encoding="utf-8", delay=False)
    except OSError as exc:
        root.warning("cannot log to %s: %s", log_file, exc.strerror)
        return
    handler.setFormatter(logging.Formatter(_FILE_FORMAT))
    root.addHandler(handler)
