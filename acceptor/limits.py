"""Enforce a lease's share on its worker: memory cap, CPU quota and process cap through cgroups.

Each worker gets its own cgroup *under the acceptor's own* (so an acceptor run by systemd, or
inside a container, keeps its accounting): ``<acceptor's cgroup>/radium-<lease>``. cgroup v2
(``memory.max``, ``cpu.max``, ``pids.max``) and v1 (``memory.limit_in_bytes``, ``cpu.cfs_quota_us``,
``pids.max``) are both handled. Limits that cannot be set fail the worker's start: a tenant's
worker never runs without its caps (:meth:`Cgroups.check` says so when the acceptor starts).
GPU shares are the vendor's business (the backend's environment: MPS thread percentage etc.).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from radium.errors import SandboxError

__all__ = ["KILL_TIMEOUT", "LEAF", "PERIOD_US", "Cgroups", "Share"]

log = logging.getLogger(__name__)
PERIOD_US = 100_000
#: cgroup v2: the leaf under the acceptor's own cgroup its processes move to (:meth:`Cgroups.
#: _delegate`); not ``radium-*``, the lease cgroups' names.
LEAF = "acceptor"
#: How long ending a lease may take to kill what runs in its cgroups.
KILL_TIMEOUT = 10.0


@dataclass(frozen=True)
class Share:
    """What a lease may use on this acceptor's CPUs and memory (0 = no limit)."""

    memory_mib: int = 0
    cpus: float = 0.0
    #: Processes and threads (the sandbox's cap; a fork bomb stays in its lease).
    processes: int = 0


#: The file that caps each controller's resource, per hierarchy version.
_CAPS = {
    "memory": ("memory.max", "memory.limit_in_bytes"),
    "cpu": ("cpu.max", "cpu.cfs_quota_us"),
    "pids": ("pids.max", "pids.max"),
}


class Cgroups:
    """Lease cgroups nested under this process's own, at ``root`` (``proc`` says where)."""

    def __init__(self, root: str = "/sys/fs/cgroup", proc: str = "/proc/self/cgroup") -> None:
        self.root = Path(root)
        self.own = _own_paths(Path(proc))
        self.v2 = (self.root / "cgroup.controllers").exists()

    def check(self) -> None:
        """Fail unless a lease cgroup with memory, CPU and process caps can be made here."""
        hint = (
            f"run the acceptor where {self.root} is mounted and writable with the memory, cpu "
            "and pids controllers (`ip netns exec` hides it; nsenter --net does not)"
        )
        if self.v2:
            self._delegate()
        # A cgroup of this process's own: two acceptors started together (one host's test
        # cluster, a unit's restart beside its old self) must not remove each other's.
        dirs = self._dirs(f"check-{os.getpid()}")
        missing = [c for c in _CAPS if not self.v2 and c not in dirs]
        if not dirs or missing:
            what = f"no {missing[0]} controller" if dirs else "no cgroup hierarchy"
            raise SandboxError(f"{what} under {self.root}", hint=hint)
        try:
            for controller, directory in dirs.items():
                directory.mkdir(exist_ok=True)
                try:
                    wanted = _CAPS if self.v2 else {controller: _CAPS[controller]}
                    index = 0 if self.v2 else 1
                    absent = [c for c, f in wanted.items() if not (directory / f[index]).exists()]
                finally:
                    directory.rmdir()
                if absent:
                    raise SandboxError(f"no {absent[0]} controller in {directory}", hint=hint)
        except OSError as exc:
            raise SandboxError(f"cannot create lease cgroups: {exc}", hint=hint) from exc

    def _delegate(self) -> None:
        """cgroup v2: enable the caps' controllers for the lease cgroups under this process's.

        A v2 cgroup that holds processes cannot enable controllers for its children ("no
        internal processes"), and a service or a container's command starts in one that holds
        it: its processes move to a leaf of its own (:data:`LEAF`) first, as a nested
        container engine does. Nothing is done where the controllers are enabled already, or
        where the parent did not hand them down (then :meth:`check` names what is missing).
        """
        own = self.root / self.own.get("", "/").lstrip("/")
        try:
            enabled = (own / "cgroup.subtree_control").read_text().split()
            needed = [c for c in _CAPS if c not in enabled]
            if not needed or not set(needed) <= set(
                (own / "cgroup.controllers").read_text().split()
            ):
                return
            leaf = own / LEAF
            leaf.mkdir(exist_ok=True)
            for pid in _procs(own):
                with contextlib.suppress(ProcessLookupError):  # exited since it was listed
                    (leaf / "cgroup.procs").write_text(str(pid))
            (own / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in needed))
        except OSError as exc:
            raise SandboxError(
                f"cannot enable the {', '.join(_CAPS)} controllers for lease cgroups in {own}: "
                f"{exc}",
                hint="start the acceptor in a cgroup it may delegate (systemd: Delegate=yes)",
            ) from exc
        log.info("moved the processes of %s to %s to enable %s for leases", own, leaf, needed)

    def _dirs(self, lease_id: str) -> dict[str, Path]:
        """The worker's cgroup directory per controller ("" for the unified v2 tree)."""
        name = f"radium-{lease_id}"
        if self.v2:
            return {"": self.root / self.own.get("", "/").lstrip("/") / name}
        return {
            c: self.root / c / self.own.get(c, "/").lstrip("/") / name
            for c in ("memory", "cpu", "pids")
            if (self.root / c).is_dir()
        }

    def apply(self, lease_id: str, pid: int, share: Share) -> list[str]:
        """Put ``pid`` under the share's limits; the limits set (for the log)."""
        if share == Share():
            return []
        applied: list[str] = []
        dirs = self._dirs(lease_id)
        if not dirs:
            raise SandboxError(f"cannot cap lease {lease_id}: no cgroup hierarchy at {self.root}")
        try:
            for controller, directory in dirs.items():
                directory.mkdir(exist_ok=True)
                applied += self._limit(controller, directory, share)
                (directory / "cgroup.procs").write_text(str(pid))
        except OSError as exc:
            raise SandboxError(f"cannot cap lease {lease_id} through cgroups: {exc}") from exc
        return applied

    def _limit(self, controller: str, directory: Path, share: Share) -> list[str]:
        done = []
        memory = share.memory_mib << 20
        quota = int(share.cpus * PERIOD_US)
        if share.memory_mib and controller in ("", "memory"):
            name = "memory.max" if self.v2 else "memory.limit_in_bytes"
            (directory / name).write_text(str(memory))
            done.append(f"memory {share.memory_mib} MiB")
        if share.cpus and controller in ("", "cpu"):
            if self.v2:
                (directory / "cpu.max").write_text(f"{quota} {PERIOD_US}")
            else:
                (directory / "cpu.cfs_period_us").write_text(str(PERIOD_US))
                (directory / "cpu.cfs_quota_us").write_text(str(quota))
            done.append(f"cpu {share.cpus:g}")
        if share.processes and controller in ("", "pids"):
            (directory / "pids.max").write_text(str(share.processes))
            done.append(f"{share.processes} processes")
        return done

    def kill(self, lease_id: str, timeout: float = KILL_TIMEOUT) -> bool:
        """SIGKILL every process in the lease's cgroups, again until none is left (a fork
        races the read) or ``timeout`` passed; True when none is left. Only what is in the
        lease's own cgroup is killed: never by uid, which other acceptors' workers may share."""
        dirs = [d for d in self._dirs(lease_id).values() if d.is_dir()]
        if not dirs:
            return True
        member = self._member(lease_id)
        if self.v2:
            with contextlib.suppress(OSError):  # Linux 5.14+: the kernel kills them all at once
                (dirs[0] / "cgroup.kill").write_text("1")
        deadline = time.monotonic() + timeout
        while pids := {pid for d in dirs for pid in _procs(d)}:
            if time.monotonic() > deadline:
                return False
            for pid in pids:
                _kill_member(pid, member)
            time.sleep(0.005)
        return True

    def _member(self, lease_id: str) -> tuple[str, str]:
        """(controller, path) of the lease's cgroup as ``/proc/PID/cgroup`` names it."""
        controller = "" if self.v2 else next(iter(self._dirs(lease_id)))
        return controller, self.own.get(controller, "/").rstrip("/") + f"/radium-{lease_id}"

    def remove(self, lease_id: str) -> None:
        """Drop the lease's cgroups once its worker is gone (a cgroup with no process)."""
        for directory in self._dirs(lease_id).values():
            with contextlib.suppress(OSError):
                directory.rmdir()


def _own_paths(proc: Path, missing_ok: bool = True) -> dict[str, str]:
    """A process's cgroup per controller, from ``/proc/self/cgroup`` ("" = v2 tree)."""
    paths: dict[str, str] = {}
    try:
        lines = proc.read_text().splitlines()
    except OSError:
        if not missing_ok:
            raise
        return paths
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path
    return paths


def _procs(directory: Path) -> set[int]:
    """The processes in a cgroup (none once it is gone)."""
    try:
        return {int(line) for line in (directory / "cgroup.procs").read_text().split()}
    except (OSError, ValueError):
        return set()


def _kill_member(pid: int, member: tuple[str, str]) -> None:
    """SIGKILL ``pid`` if it is (still) in the cgroup ``member`` names: through a pidfd, so a
    pid that was reused after the cgroup listed it is never signalled."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return  # exited since
    except OSError:  # no pidfd (before Linux 5.3): a plain kill, the pid read just now
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        return
    try:
        if _cgroup_of(pid, member[0]) == member[1]:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
    except ProcessLookupError:
        pass
    finally:
        os.close(fd)


def _cgroup_of(pid: int, controller: str) -> str | None:
    """``pid``'s cgroup path for ``controller`` ("" = the v2 tree); None once it is gone."""
    try:
        paths = _own_paths(Path(f"/proc/{pid}/cgroup"), missing_ok=False)
    except OSError:
        return None
    return paths.get(controller)
