"""Daemons a supervisor started (``radium up``) die with it, even when it is killed with SIGKILL.

The supervisor names itself in ``RADIUM_SUPERVISOR``; a daemon so started asks the kernel for
SIGTERM when its parent dies (``PR_SET_PDEATHSIG``, so it shuts down as on ``radium down``), then
checks that its parent still is the supervisor: it may have died before the request was made.
"""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Mapping

from radium.errors import UnavailableError

__all__ = ["ENV_VAR", "follow_supervisor"]

ENV_VAR = "RADIUM_SUPERVISOR"
_PR_SET_PDEATHSIG = 1


def follow_supervisor(environ: Mapping[str, str] = os.environ) -> None:
    """When a supervisor started this process, make its death this process's SIGTERM."""
    supervisor = environ.get(ENV_VAR, "")
    if not supervisor.isdigit():
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != int(supervisor):
        raise UnavailableError(f"the radium up (pid {supervisor}) that started this is gone")
