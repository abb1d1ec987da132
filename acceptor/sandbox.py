"""Confine a lease's worker: namespaces, a host uid of its own, seccomp, rlimits (docs/security.md).

Process-mode workers start under bubblewrap (Debian ``bubblewrap``), run by the root acceptor:
bubblewrap builds the worker's mount, PID, network (``lo`` only), IPC and UTS namespaces with the
host visible read-only and by allow-list only (:func:`host_view`), its lease directory as the
only writable path, a private size-bounded ``/tmp`` and ``/dev/shm``, a minimal ``/dev`` plus the
lease's device nodes, and this module's seccomp filter. ``setpriv`` (util-linux) then drops to
the lease's own unprivileged host uid and gid, clears supplementary groups, empties the
capability bounding set and sets no_new_privs before the worker's Python starts. Root does the
mounts, so an acceptor installed under a private directory still works; the worker itself is
never root in any namespace (a user namespace would give it a root to attack; seccomp refuses
creating one). bubblewrap holds the sandbox before its payload starts (``--block-fd``) so the
lease's cgroup and rlimits are in place before the first worker instruction.

Container-mode workers get the same guarantees from the engine: :meth:`Sandbox.docker_options`.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import select
import shutil
import subprocess
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from radium.acceptor import seccomp
from radium.acceptor.hostview import HostView as HostView  # re-exported: its home was here
from radium.acceptor.hostview import host_view, library_mounts, python_paths, shown
from radium.acceptor.limits import Share
from radium.acceptor.sandbox_users import NSSWITCH, group, passwd
from radium.configtree import SandboxConfig
from radium.errors import SandboxError

__all__ = ["HOME_TARGET", "SETUP_TIMEOUT", "HostView", "Sandbox", "Tenant"]

log = logging.getLogger(__name__)
#: The lease's directory inside the sandbox: the worker's home and working directory.
HOME_TARGET = "/lease"
#: How long bubblewrap may take to build a sandbox before it counts as failed.
SETUP_TIMEOUT = 30.0
_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True)
class Tenant:
    """One lease's worker as the sandbox sees it: who it runs as, what it may use."""

    lease_id: str
    uid: int
    #: Host directory of the lease, owned by ``uid``: the worker's only writable host path.
    home: Path
    env: Mapping[str, str] = field(default_factory=dict)
    #: Host device nodes of the lease's devices (``/dev/nvidia0``, ``/dev/nvidiactl`` ...).
    devices: tuple[str, ...] = ()
    share: Share = field(default_factory=Share)
    #: (path the loader cache names, real file) of the device vendor's user-space driver
    #: libraries (``Backend.driver_files``): bound read-only, whatever the host view shows.
    libraries: tuple[tuple[str, str], ...] = ()
    #: (host directory, path) bound read-write, after the scratch mounts: a fractional
    #: lease's MPS pipe directory (acceptor/gpu_sharing.py), owned by its GPU's shared uid.
    binds: tuple[tuple[str, str], ...] = ()


def _data_fd(data: bytes) -> int:
    """A pipe's read end holding ``data`` (small: it fits in the pipe, the write never blocks)."""
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, data)
    finally:
        os.close(write_end)
    return read_end


class Sandbox:
    """Builds and starts confined workers; one per acceptor, shared by every lease."""

    def __init__(
        self,
        config: SandboxConfig,
        view: HostView | None = None,
        bwrap: str | None = None,
        setpriv: str | None = None,
    ) -> None:
        self.config = config
        self.view = view or host_view([*python_paths(), *config.read_only])
        self.bwrap = bwrap or _tool("bwrap", "bubblewrap")
        self.setpriv = setpriv or _tool("setpriv", "util-linux")
        self.filter = seccomp.bpf()
        self.profile = seccomp.oci_profile()
        #: bubblewrap is forked from this thread, which lives as long as the acceptor: its
        #: --die-with-parent (PR_SET_PDEATHSIG) fires when the *thread* that forked it ends,
        #: and a worker may be started on a data-plane connection's short-lived thread.
        self.forker = ThreadPoolExecutor(1, thread_name_prefix="sandbox-fork")

    def tmp_bytes(self, share: Share) -> int:
        """The size bound of the worker's /tmp and /dev/shm (each), within its memory cap."""
        mib = self.config.tmp_mib
        if share.memory_mib:
            mib = min(mib, share.memory_mib)
        return mib << 20

    def command(self, tenant: Tenant, argv: list[str], fds: Mapping[str, int]) -> list[str]:
        """bubblewrap's argv for ``argv`` confined as ``tenant``; ``fds`` names the passed pipes
        (seccomp, passwd, group, info, block)."""
        args = [self.bwrap, "--die-with-parent", "--new-session"]
        args += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"]
        args += ["--unshare-cgroup-try", "--hostname", "radium-worker"]
        # The private scratch first: the host paths bound below may live under /tmp.
        args += ["--proc", "/proc", "--dev", "/dev"]
        size = str(self.tmp_bytes(tenant.share))
        for scratch in ("/tmp", "/dev/shm"):
            args += ["--perms", "1777", "--size", size, "--tmpfs", scratch]
        made: set[str] = {"/", "/tmp", "/dev", "/dev/shm", "/proc"}
        libraries = library_mounts(self.view, tenant.libraries)
        placed = [path for _, _, path in libraries if not shown(self.view, path)]
        bound = [path for _, path in tenant.binds]
        for path in [*self.view.binds, HOME_TARGET, "/etc/passwd", *placed, *bound]:
            for parent in reversed(Path(path).parents):
                if str(parent) not in made:
                    made.add(str(parent))
                    args += ["--perms", "0755", "--dir", str(parent)]
        for target, path in self.view.links:
            args += ["--symlink", target, path]
        for path in self.view.binds:
            args += ["--ro-bind", path, path]
        for kind, source, path in libraries:
            args += [kind, source, path]
        # Readable by the worker: bubblewrap makes data files 0600 (root's) unless told.
        for name, path in (("passwd", "/etc/passwd"), ("group", "/etc/group"),
                           ("nsswitch", "/etc/nsswitch.conf")):  # fmt: skip
            args += ["--perms", "0644", "--ro-bind-data", str(fds[name]), path]
        for node in tenant.devices:
            args += ["--dev-bind", node, node]
        for source, path in tenant.binds:
            args += ["--bind", source, path]
        args += ["--bind", str(tenant.home), HOME_TARGET, "--chdir", HOME_TARGET]
        # USER and LOGNAME as a login gives them: getpass.getuser() reads them first.
        env = {"PATH": _PATH, "HOME": HOME_TARGET, "TMPDIR": "/tmp", "LANG": "C.UTF-8"}
        env.update(USER="worker", LOGNAME="worker")
        args.append("--clearenv")
        for name, value in {**env, **tenant.env}.items():
            args += ["--setenv", name, value]
        # The payload starts as root with only what setpriv needs to drop to the tenant.
        args += ["--cap-drop", "ALL"]
        for cap in ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP"):
            args += ["--cap-add", cap]
        args += ["--seccomp", str(fds["seccomp"])]
        args += ["--info-fd", str(fds["info"]), "--block-fd", str(fds["block"]), "--"]
        uid = str(tenant.uid)
        args += [self.setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
        args += ["--bounding-set=-all", "--inh-caps=-all", "--no-new-privs", "--", *argv]
        return args

    def spawn(
        self,
        tenant: Tenant,
        argv: list[str],
        keep_fd: int,
        join: Callable[[int], object],
        output: int | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start ``argv`` confined; ``join(pid)`` puts the held sandbox under the lease's
        cgroups before the payload runs. ``keep_fd`` is passed through (the control socket);
        ``output`` takes the stdout and stderr of bubblewrap and the worker (the tenant's)."""
        info_read, info_write = os.pipe()
        block_read, block_write = os.pipe()
        fds = {
            "seccomp": _data_fd(self.filter),
            "passwd": _data_fd(passwd(tenant.uid, HOME_TARGET)),
            "nsswitch": _data_fd(NSSWITCH),
            "group": _data_fd(group(tenant.uid)),
            "info": info_write,
            "block": block_read,
        }
        try:
            process = self.forker.submit(
                subprocess.Popen,
                self.command(tenant, argv, fds),
                pass_fds=[keep_fd, *fds.values()],
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=output,
                env={"PATH": _PATH},
            ).result()
        finally:
            for fd in fds.values():
                os.close(fd)
        try:
            child = self._sandbox_pid(info_read, process, tenant.lease_id)
            try:
                for limit, value in (
                    (resource.RLIMIT_NPROC, self.config.max_processes),
                    (resource.RLIMIT_NOFILE, self.config.max_open_files),
                ):
                    resource.prlimit(child, limit, (value, value))
                join(child)
                os.write(block_write, b"go")
            except (ProcessLookupError, BrokenPipeError):
                # bubblewrap gave up after it reported the sandbox (a bind it cannot make is
                # found before it reads the "go", so it may exit at any step here): nothing
                # runs in it, and the worker's start reports bubblewrap's exit status.
                return process
        except (OSError, SandboxError):
            process.kill()
            process.wait()
            raise
        finally:
            os.close(info_read)
            os.close(block_write)
        return process

    def _sandbox_pid(self, info: int, process: subprocess.Popen[bytes], lease: str) -> int:
        """The held sandbox's pid, from bubblewrap's info pipe."""
        data = b""
        while True:
            ready, _, _ = select.select([info], [], [], SETUP_TIMEOUT)
            if not ready:
                why = f"no answer within {SETUP_TIMEOUT:g}s"
                break
            chunk = os.read(info, 4096)
            if not chunk:  # bubblewrap is gone before the sandbox stood
                why = f"bubblewrap exited with {process.wait(timeout=SETUP_TIMEOUT)}"
                break
            data += chunk
            try:
                return int(json.loads(data)["child-pid"])
            except (ValueError, KeyError, TypeError):
                continue  # a part of the JSON so far
        raise SandboxError(
            f"the sandbox of lease {lease}'s worker could not be built ({why})",
            hint="bubblewrap's own message is in the acceptor log",
        )

    def docker_options(self, tenant: Tenant) -> tuple[str, dict[str, Any]]:
        """(user, HostConfig fields) that confine a container-mode worker the same way."""
        limits = [
            {"Name": name, "Soft": value, "Hard": value}
            for name, value in (
                ("nproc", self.config.max_processes),
                ("nofile", self.config.max_open_files),
            )
        ]
        size = self.tmp_bytes(tenant.share)
        host = {
            "CapDrop": ["ALL"],
            "SecurityOpt": ["no-new-privileges", "seccomp=" + json.dumps(self.profile)],
            "PidsLimit": self.config.max_processes,
            "ReadonlyRootfs": True,
            "Tmpfs": {"/tmp": f"rw,nosuid,nodev,size={size}"},
            "ShmSize": size,
            "Ulimits": limits,
            # Its output is the tenant's: docker keeps at most this much of it (the report of
            # its end reads the last lines), whatever the daemon's default log driver.
            "LogConfig": {"Type": "json-file", "Config": {"max-size": "1m", "max-file": "1"}},
            "Devices": [
                {"PathOnHost": n, "PathInContainer": n, "CgroupPermissions": "rw"}
                for n in tenant.devices
            ],
        }
        return f"{tenant.uid}:{tenant.uid}", host


def _tool(name: str, package: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise SandboxError(
            f"{name} is not installed: lease workers cannot be confined",
            hint=f"apt-get install {package}",
        )
    return path
