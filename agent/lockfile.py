"""The agent's lock file: one agent per state file, and which process that is.

The agent holds an exclusive ``flock`` on it for its life and writes its pid into it, so
``radium down`` can stop the agent of its instance's config whoever started it (``radium up``,
or ``radium exec`` and the hook through autostart), checking that the pid still holds the lock
and is a radium agent before it signals anything.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from pathlib import Path

import psutil

__all__ = ["AUTOSTARTED", "autostarted", "claim", "holder", "stop_holder"]

log = logging.getLogger(__name__)


def claim(path: Path) -> int | None:
    """The lock at ``path`` taken and our pid written in it (its descriptor, to keep open for
    the agent's life), or None when another process holds it."""
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
    fd = os.open(path, flags, 0o600)  # not truncated: the holder's pid stays until we hold it
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def holder(path: Path) -> int | None:
    """The pid of the agent holding the lock at ``path``; None when no process holds it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            return int(text) if text.isdigit() else None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


#: In the environment of an agent that autostart started (agentclient.ensure_running).
AUTOSTARTED = "RADIUM_AGENT_IDLE_EXIT"


def autostarted(pid: int) -> bool:
    """Whether process ``pid`` is an agent that autostart started."""
    try:
        return AUTOSTARTED in psutil.Process(pid).environ()
    except psutil.Error:
        return False


def stop_holder(path: Path, grace: float, marked: str = "") -> int | None:
    """Stop the radium agent holding the lock at ``path`` (SIGTERM, SIGKILL after ``grace``
    seconds); its pid, or None when no agent holds it. With ``marked``, only an agent whose
    environment has that variable (an autostarted one)."""
    pid = holder(path)
    if pid is None:
        return None
    try:
        process = psutil.Process(pid)
        cmdline = process.cmdline()
        if marked and marked not in process.environ():
            return None
    except psutil.Error:
        return None
    # The pid is the holder's word, in a root-only directory: still, signal only an agent.
    if cmdline[-1:] != ["agent"] or not any(part.endswith("radium") for part in cmdline):
        log.warning("%s names pid %d, which is no radium agent: left alone", path, pid)
        return None
    with contextlib.suppress(psutil.Error):
        process.terminate()
        _, left = psutil.wait_procs([process], timeout=grace)
        for survivor in left:
            survivor.kill()
    return pid
