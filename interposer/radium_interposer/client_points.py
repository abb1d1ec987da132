"""The program's own points where its streamed calls must have run: ``print``, a fork and exit
(docs/remoting.md, "Calls are streamed"), and the counts a process leaves for the benchmarks.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import json
import os
import sys
from typing import Any, Optional

from radium_interposer import client_warnings
from radium_interposer.errors import RemoteError

__all__ = ["install_print_barrier", "sync_at_exit", "sync_before_fork"]


def install_print_barrier(state: Any) -> None:
    """``print`` (and ``os.fork``) first waits for this thread's streamed calls: their output
    (a shipped ``forward`` that prints) comes before the line, and a streamed call's error is
    raised at the print, not after it, as locally (docs/remoting.md, "Calls are streamed")."""
    original = builtins.print
    if getattr(original, "radium_barrier", False):
        return

    @functools.wraps(original)
    def print(*args: Any, **kwargs: Any) -> None:
        _barrier(state)
        original(*args, **kwargs)

    print.radium_barrier = True  # type: ignore[attr-defined]
    builtins.print = print
    _install_fork_barrier(state)


def _install_fork_barrier(state: Any) -> None:
    """``os.fork`` first waits for this thread's streamed calls, so that a streamed call's
    error is raised at the fork, in the program, before there are two processes. (The at-fork
    hook, run for forks that do not go through ``os.fork``, cannot raise: its barrier is quiet
    and leaves the error to the parent's next sync point.)"""
    original = getattr(os, "fork", None)
    if original is None or getattr(original, "radium_barrier", False):
        return

    @functools.wraps(original)
    def fork() -> int:
        _barrier(state)
        return original()  # type: ignore[no-any-return]

    fork.radium_barrier = True  # type: ignore[attr-defined]
    os.fork = fork


def _barrier(state: Any) -> None:
    """Wait for this thread's streamed calls, if any are not yet answered for."""
    conn = getattr(state.local, "conn", None)
    if conn is not None and conn.unsynced and conn.pid == os.getpid() and not conn.broken:
        conn.sync()


def sync_before_fork(state: Any) -> None:
    """The at-fork hook's barrier, for every fork (not only ``os.fork``): this process's
    pipelined calls run before there are two processes. Quiet, as a hook cannot raise (it would
    be lost): a streamed call's error waits for the parent's next sync point."""
    for conn in list(state.connections):
        if conn.pid == os.getpid() and not conn.broken:
            with contextlib.suppress(RemoteError):
                conn.sync(quiet=True)


def sync_at_exit(state: Any) -> None:
    """Pipelined calls still pending run to their end before the program does: their effects,
    output and callbacks happen, as they would have locally. A streamed call's error not yet
    reported is the program's uncaught exception: printed, and the exit status is 1."""
    failed: Optional[BaseException] = None
    for conn in list(state.connections):
        if conn.pid == os.getpid() and not conn.broken:
            try:
                conn.sync()
            except Exception as error:
                if getattr(error, client_warnings.STREAMED_AT, None) is not None:
                    failed = failed or error
                elif not isinstance(error, RemoteError):  # a streamed result's, never used
                    raise
    _write_counts(state, os.environ.get("RADIUM_STATS_FILE"))
    if failed is not None:
        sys.excepthook(type(failed), failed, failed.__traceback__)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)  # as an uncaught exception ends a program


def _write_counts(state: Any, path: Optional[str]) -> None:
    """``RADIUM_STATS_FILE``: this process's counts, one JSON line appended (a forked child
    adds its own), for the benchmarks' calls and round trips per program."""
    if not path:
        return
    try:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"pid": os.getpid(), **state.counts}) + "\n")
    except OSError as exc:  # the program's own exit must not fail on a statistics file
        sys.stderr.write(f"radium: cannot write RADIUM_STATS_FILE {path}: {exc}\n")
