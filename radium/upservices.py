"""The services of a ``radium up`` (pool, acceptor, node agent) as its child processes: each
started from this installation's ``radium`` with its log in the state directory, waited for
until the pool answers with the acceptor registered, watched for an exit, and stopped.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from radium.errors import DeadlineError, RadiumError, ServiceError
from radium.poolclient import PoolClient
from radium.statedir import StateDir

__all__ = ["SERVICES", "STOP_GRACE", "check_alive", "start", "stop", "wait_ready"]

#: Seconds a service has to exit after SIGTERM before it is killed.
STOP_GRACE = 10.0
#: In the order they start; they stop in the reverse one.
SERVICES = ("pool", "acceptor", "agent")


def start(
    directory: StateDir, env: Mapping[str, str], lock: int
) -> dict[str, subprocess.Popen[bytes]]:
    """Each of :data:`SERVICES`, started in a session of its own with ``env``, appending to
    ``SERVICE.log`` in ``directory`` and inheriting ``lock`` (the state directory's). When one
    fails to start, those started before it are stopped."""
    cli = os.path.join(os.path.dirname(sys.executable), "radium")
    children: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for service in SERVICES:
            log = directory.open(f"{service}.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            with os.fdopen(log, "ab") as log_file:
                children[service] = subprocess.Popen(
                    [cli, service] + ([] if service == "agent" else ["serve"]),
                    env=env,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    pass_fds=(lock,),
                )
    except BaseException:
        stop(children)
        raise
    return children


def check_alive(children: Mapping[str, subprocess.Popen[bytes]], state: Path) -> None:
    """A :class:`ServiceError` naming the first service that has exited, and its log."""
    for service, child in children.items():
        if child.poll() is not None:
            raise ServiceError(
                f"radium {service} exited with {child.returncode}",
                hint=f"see {state}/{service}.log",
            )


def wait_ready(
    client: PoolClient,
    children: Mapping[str, subprocess.Popen[bytes]],
    state: Path,
    timeout: float,
) -> int:
    """The number of devices, once the pool answers and the acceptor is registered."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        check_alive(children, state)
        try:
            status = client.status()
        except RadiumError:
            status = None
        # Up: registered with this pool process (not a record it restored from its database).
        if status is not None and any(a.up for a in status.acceptors):
            return len(status.devices)
        time.sleep(0.2)
    raise DeadlineError(
        f"the pool and acceptor did not come up within {timeout:g}s",
        hint=f"see the logs in {state}",
    )


def stop(children: Mapping[str, subprocess.Popen[bytes]]) -> None:
    """SIGTERM to each that still runs, the last started first; SIGKILL to any that has not
    exited :data:`STOP_GRACE` seconds later."""
    for child in reversed(list(children.values())):
        if child.poll() is None:
            child.terminate()
    deadline = time.monotonic() + STOP_GRACE
    for child in children.values():
        try:
            child.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
