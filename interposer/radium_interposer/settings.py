"""The program's framework settings, on the worker: thread counts and the like, from the
client's environment under an allow-list (docs/remoting.md, "Framework settings").

A worker starts with a clean environment, so a program run with ``OMP_NUM_THREADS=1`` would
compute remotely with the worker's default thread count (and its float sums differ in the last
digits). The client sends the variables named here (:func:`collect`) with its connection's first
request, before the first remote import, when the libraries read them; the worker caps thread
counts at the lease's CPU share and sets them (:func:`apply`). Nothing else of the client's
environment leaves it: no variable that names a file or directory (the client's paths mean
nothing on the worker, and some name code to load), and no other variable at all (secrets).
"""

from __future__ import annotations

import math
import os
import re
import sys
from typing import Any, Dict, Optional

__all__ = [
    "NAMES",
    "PREFIXES",
    "THREADS",
    "allowed",
    "apply",
    "cap",
    "cgroup_quota",
    "collect",
    "cpu_share",
    "openblas_threads",
]

#: Thread counts, forwarded by name and capped at the lease's CPU share.
THREADS = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
#: Other variables forwarded by name.
NAMES = (*THREADS, "CUBLAS_WORKSPACE_CONFIG")
#: Prefixes of forwarded variables, less the names in :data:`_PATHS`.
PREFIXES = ("PYTORCH_", "TORCH_")
#: Parts of a name that say its value is a file, a directory or code to load (TORCH_HOME,
#: TORCH_EXTENSIONS_DIR, PYTORCH_KERNEL_CACHE_PATH, TORCH_LOGS_OUT, TORCH_TRACE...): not sent.
_PATHS = re.compile(r"HOME|DIR|PATH|CACHE|FILE|_OUT|TRACE|EXTENSION|HUB|LIB|PLUGIN|MODULE")
#: At most this many variables, of names and values at most this long, cross.
MAX_VARIABLES, MAX_NAME, MAX_VALUE = 64, 128, 1024


def allowed(name: str, value: str) -> bool:
    """Whether the variable ``name=value`` is one of the program's settings the worker takes."""
    if len(name) > MAX_NAME or len(value) > MAX_VALUE or "\0" in value or "/" in value:
        return False  # a "/" is a path, whatever the variable's name
    if name in NAMES:
        return True
    return name.startswith(PREFIXES) and not _PATHS.search(name)


def collect() -> Dict[str, str]:
    """The program's settings: its environment's allowed variables, now."""
    found = {k: v for k, v in os.environ.items() if allowed(k, v)}
    return dict(sorted(found.items())[:MAX_VARIABLES])


def cpu_share() -> int:
    """The CPUs this process may use: its cgroup's quota (cpu.max, up the tree), and the CPUs it
    may run on."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    quota = cgroup_quota()
    share = cores or 1
    return max(1, min(share, math.ceil(quota))) if quota is not None else share


def cgroup_quota() -> Optional[float]:
    """The smallest cpu.max quota/period of this process's cgroup (v2) and its parents."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    path = next((line[3:] for line in lines if line.startswith("0::")), None)
    quota: Optional[float] = None
    while path is not None:
        try:
            with open(f"/sys/fs/cgroup{path.rstrip('/')}/cpu.max") as f:
                limit, period = f.read().split()[:2]
            if limit != "max":
                share = int(limit) / int(period)
                quota = share if quota is None else min(quota, share)
        except (OSError, ValueError):
            pass
        path = None if path in ("/", "") else os.path.dirname(path.rstrip("/"))
    return quota


def cap(name: str, value: str, share: int) -> str:
    """A thread count at most ``share`` (each level of OMP's ``4,2``); other values as they are
    (a value a library cannot read, it ignores here as it would locally)."""
    if name not in THREADS:
        return value
    levels = value.split(",")
    if not all(level.strip().isdigit() for level in levels):
        return value
    return ",".join(str(min(int(level), share)) for level in levels)


def apply(env: Dict[str, str]) -> None:
    """Set the program's settings in this worker (for every connection: the last sent hold)."""
    share = cpu_share()
    wanted = {k: cap(k, v, share) for k, v in env.items() if allowed(k, v)}
    changed = {k: v for k, v in wanted.items() if os.environ.get(k) != v}
    if not changed:
        return
    os.environ.update(changed)
    _log().info("program settings: %s (CPU share %d)", changed, share)
    try:
        _at_runtime(changed)
    except Exception as exc:  # a setting must not fail the program's call that carried it
        _log().warning("program settings not applied at runtime: %r", exc)


def _at_runtime(changed: Dict[str, str]) -> None:
    """Libraries loaded already read their settings at load: set what can be set now, and say
    what cannot (it applies to a new worker)."""
    threads = next((changed[k] for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS") if k in changed), "")
    count = threads.split(",")[0].strip()
    torch = sys.modules.get("torch")
    if torch is not None and count.isdigit() and int(count) > 0:
        torch.set_num_threads(int(count))
        _log().info("torch is loaded already: set_num_threads(%s)", count)
    blas = next(
        (changed[k] for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS") if k in changed), ""
    )
    count = blas.split(",")[0].strip()
    if "numpy" in sys.modules and count.isdigit() and int(count) > 0:
        if openblas_threads(int(count)) is not None:
            _log().info("numpy is loaded already: its OpenBLAS set to %s threads", count)
        else:
            _log().warning(
                "numpy is loaded already: its BLAS keeps its threads (a new worker takes %s)", count
            )


def _log() -> Any:
    # Imported by the worker only: the interposer loads this module before the program's
    # imports, and must not import what a program may remote (logging, ctypes).
    import logging

    return logging.getLogger("radium.worker")


def openblas_threads(count: Optional[int] = None) -> Optional[int]:
    """The thread count of the OpenBLAS this process loaded (numpy's), after setting it to
    ``count``; None when there is none (or another BLAS: MKL reads its variables at load)."""
    import ctypes  # the worker's: see _log

    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "openblas" in line and "/" in line}
    except OSError:
        return None
    for path in sorted(paths):
        try:
            library = ctypes.CDLL(path)  # loaded already: this only finds it
        except OSError:
            continue
        for prefix, suffix in (("scipy_openblas_", "64_"), ("openblas_", "64_"), ("openblas_", "")):
            get = getattr(library, f"{prefix}get_num_threads{suffix}", None)
            put = getattr(library, f"{prefix}set_num_threads{suffix}", None)
            if get is not None and put is not None:
                if count is not None:
                    put(ctypes.c_int(count))
                return int(get())
    return None
