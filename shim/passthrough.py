"""Find the low-level runtime and exec it: the path of every runc call that is not create/run.

docker calls the runtime three more times per container (start, delete, delete), so this path
imports only what it must: it reads just the runtime list from the config (parsed once per
config change: :mod:`radium.tomlcache`). The full, strict config load happens on create, where
a bad file stops the container; here a bad file falls back to the defaults, so running
containers can always be stopped and deleted.
"""

from __future__ import annotations

import os
import sys

from radium import tomlcache
from radium.constants import CONFIG_PATH
from radium.errors import ConfigError

# Not typing.TYPE_CHECKING: importing typing costs milliseconds on every container start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping, Sequence

__all__ = [
    "DEFAULT_CONFIG",
    "DEFAULT_RUNTIMES",
    "FULL_SUFFIX",
    "PROGRAM",
    "configured_runtimes",
    "exec_runtime",
    "find_runtime",
    "selves",
]

DEFAULT_CONFIG = CONFIG_PATH
DEFAULT_RUNTIMES = ("runc", "crun")
PROGRAM = "radium-runtime"
#: The Python programs' names: their shell fronts' (bin/) with this suffix.
FULL_SUFFIX = "-full"


def configured_runtimes(
    environ: Mapping[str, str], cache_dir: str | None = None
) -> tuple[str, ...]:
    """``runtime.runtimes`` from the config file, or the defaults."""
    path = environ.get("RADIUM_CONFIG") or DEFAULT_CONFIG
    try:
        data = tomlcache.load_file(path, path, cache_dir)
    except (OSError, ConfigError):
        return DEFAULT_RUNTIMES
    runtime = data.get("runtime")
    runtimes = runtime.get("runtimes") if isinstance(runtime, dict) else None
    if isinstance(runtimes, list) and runtimes and all(isinstance(r, str) for r in runtimes):
        return tuple(runtimes)
    return DEFAULT_RUNTIMES


def selves(self_path: str) -> frozenset[str]:
    """This program, and the shell front beside it that execs it (``radium-runtime`` for
    ``radium-runtime-full``): a runtime list naming either would exec us in a loop."""
    me = os.path.realpath(self_path)
    front = me[: -len(FULL_SUFFIX)] if me.endswith(FULL_SUFFIX) else me
    return frozenset((me, front))


def find_runtime(runtimes: Sequence[str], environ: Mapping[str, str], self_path: str) -> str | None:
    """The first of ``runtimes`` that is an executable other than this wrapper or its front."""
    us = selves(self_path)
    search = environ.get("PATH", os.defpath).split(os.pathsep)
    for name in runtimes:
        candidates = [name] if "/" in name else [os.path.join(d, name) for d in search if d]
        for path in candidates:
            executable = os.path.isfile(path) and os.access(path, os.X_OK)
            if executable and os.path.realpath(path) not in us:
                return path
    return None


def exec_runtime(argv: Sequence[str], environ: Mapping[str, str]) -> int:
    """Exec the runtime with our argv; return 1 (after saying why) when there is none."""
    runtimes = configured_runtimes(environ)
    runtime = find_runtime(runtimes, environ, argv[0])
    if runtime is None:
        sys.stderr.write(f"{PROGRAM}: none of the OCI runtimes {list(runtimes)} is installed\n")
        return 1
    os.execv(runtime, [runtime, *argv[1:]])
