"""The lease book: what the agent holds for which container, kept in its state file.

The file is rewritten whole after every change, so a restarted agent resumes every lease's
keep-alive, watching and data-plane socket. It holds lease credentials: 0600 in a 0700 directory.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil

__all__ = ["LEASE_FILE", "Held", "LeaseBook", "process_started", "write_lease_file"]

log = logging.getLogger(__name__)
#: In the container's runtime directory (``/run/radium`` inside): the lease as it sees it.
LEASE_FILE = "lease.json"


@dataclass
class Held:
    """One container's lease, as the agent remembers it across restarts."""

    container: str
    lease_id: str
    ttl: float
    pid: int
    pid_started: float
    runtime_dir: str
    lease: dict[str, Any]
    credential: str = ""
    #: The key of the DRA claim whose lease this container is attached to ("" for a lease of
    #: its own): releasing it only detaches the container.
    claim: str = ""


class LeaseBook:
    """The held leases by container, and their state file.

    ``lock`` serialises changes: each one takes it, changes :attr:`held` and saves the file
    before it lets go, so the file never lags a change another task could observe. Nothing that
    awaits the pool runs under it (an allocation may wait minutes for capacity); readers that
    only look, without awaiting between the look and the use, need not take it.
    """

    def __init__(self, state_file: Path) -> None:
        self.state_file = state_file
        self.held: dict[str, Held] = {}
        self.lock = asyncio.Lock()

    def __len__(self) -> int:
        return len(self.held)

    def __iter__(self) -> Iterator[Held]:
        return iter(list(self.held.values()))  # a copy: callers await while they walk it

    def get(self, container: str) -> Held | None:
        return self.held.get(container)

    def records(self) -> list[dict[str, Any]]:
        return [asdict(h) for h in self.held.values()]

    async def add(self, held: Held) -> None:
        async with self.lock:
            self.held[held.container] = held
            self.save()

    async def remove(self, container: str) -> Held | None:
        """Take the container's lease out of the book; None when it held none."""
        async with self.lock:
            held = self.held.pop(container, None)
            if held is not None:
                self.save()
            return held

    def load(self) -> None:
        try:
            data = json.loads(self.state_file.read_text())
            self.held = {h["container"]: Held(**h) for h in data.get("held", [])}
        except FileNotFoundError:
            self.held = {}
        except (ValueError, TypeError, KeyError) as exc:
            log.error("agent state %s is unreadable (%s); starting empty", self.state_file, exc)
            self.held = {}
        log.info("agent resumes %d leases", len(self.held))

    def save(self) -> None:
        self.state_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.state_file.parent.chmod(0o700)  # it holds lease credentials
        tmp = self.state_file.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # 0600 from the start
        with os.fdopen(fd, "w") as f:
            json.dump({"held": self.records()}, f)
        os.replace(tmp, self.state_file)

    def note_state(self, held: Held, state: str, message: str) -> None:
        """A notice (preempted, ended) goes into the container's lease.json."""
        if not state or held.lease.get("state") == state:
            return
        held.lease.update(state=state, message=message)
        log.warning(
            "container %s: lease %s is %s: %s", held.container, held.lease_id, state, message
        )
        self.save()
        write_lease_file(held)


def write_lease_file(held: Held) -> None:
    """Write the lease into its container's runtime directory, whole (the container may be reading
    it)."""
    if held.runtime_dir and os.path.isdir(held.runtime_dir):
        path = Path(held.runtime_dir) / LEASE_FILE
        tmp = path.with_suffix(".tmp")  # replaced whole: the container may be reading it
        tmp.write_text(json.dumps(held.lease, indent=2) + "\n")
        os.replace(tmp, path)


def process_started(pid: int) -> float:
    """The process's start time (0 when it does not exist): pid plus this survives pid reuse."""
    try:
        return psutil.Process(pid).create_time() if pid > 0 else 0.0
    except psutil.Error:
        return 0.0
