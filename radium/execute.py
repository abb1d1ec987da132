"""``radium exec``: run a local command with the interposer and a lease (no container).

The simplest way to try remoting: the command's Python processes load the interposer through
``sitecustomize`` on ``PYTHONPATH`` and get their data-plane connections from the node agent,
exactly as a container's do through its runtime directory. The lease is held for the command's
life and released when it ends (or by the agent, should this process die first).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
from collections.abc import Sequence
from pathlib import Path

import radium_interposer
from radium import agentclient, remotenames
from radium.configtree import Config
from radium.errors import InvalidRequestError, RadiumError, UsageError
from radium.hooks import rundir
from radium.shim.request import wait_seconds

__all__ = ["BOOT", "environment", "run"]

BOOT = "import radium_interposer.boot  # written by radium exec\n"


def environment(
    runtime: Path, remote: Sequence[str], split: str | None, base: dict[str, str]
) -> dict[str, str]:
    """The command's environment: the interposer on its path, told what to remote."""
    interposer = str(Path(radium_interposer.__file__).resolve().parent.parent)
    paths = [str(runtime / "python"), interposer]
    if base.get("PYTHONPATH"):
        paths.append(base["PYTHONPATH"])
    env = {**base, "PYTHONPATH": os.pathsep.join(paths), "RADIUM_RUNTIME_DIR": str(runtime)}
    if remote:
        env["RADIUM_REMOTE"] = ",".join(remote)
    if split:
        env["RADIUM_SPLIT"] = str(Path(split).resolve())
    return env


def run(
    config: Config,
    command: Sequence[str],
    remote: Sequence[str],
    split: str | None,
    request: dict[str, str],
) -> int:
    """``radium exec``: lease, then run ``command`` with its ``remote`` modules served by the
    lease's worker; its exit code."""
    if not command:
        raise UsageError("radium exec needs a command", hint="radium exec --remote numpy -- CMD")
    if not remote and not split:
        raise UsageError("nothing to remote", hint="add --remote MODULE or --split FILE")
    if shutil.which(command[0]) is None:
        raise UsageError(f"command not found: {command[0]}")
    modules = remotenames.entries(remote, split)  # a malformed name is refused before leasing
    name = f"exec-{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
    # Ours alone, as a container's is its user's: the socket in it runs code in our lease.
    runtime = Path(rundir.make(config.hook.state_dir, name, (os.geteuid(), os.getegid())))
    (runtime / "python").mkdir(mode=0o700)
    (runtime / "python" / "sitecustomize.py").write_text(BOOT)
    try:
        wait = wait_seconds(request)
        if not agentclient.acquire(config, name, os.getpid(), request, str(runtime), wait):
            raise InvalidRequestError("the request asks for no device", hint="use --gpus 1")
        remotenames.check_on_worker(runtime, modules)  # before the program: one clear line
        return _run_child(command, environment(runtime, remote, split, dict(os.environ)))
    finally:
        # Should this fail, the agent releases the lease once it sees this process gone.
        with contextlib.suppress(RadiumError):
            agentclient.release(config, name)
        shutil.rmtree(runtime, ignore_errors=True)


def _run_child(command: Sequence[str], env: dict[str, str]) -> int:
    child = subprocess.Popen(list(command), env=env)
    forward = {s: signal.signal(s, lambda n, f: child.send_signal(n)) for s in (2, 15)}
    try:
        code = child.wait()
    finally:
        for signum, handler in forward.items():
            signal.signal(signum, handler)
    return code if code >= 0 else 128 - code
