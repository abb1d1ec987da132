"""A private containerd for tests: own root, state and socket; ``ctr`` against it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from pathlib import Path

from integration.host import log_tail, need, start_daemon, stop_daemon
from integration.oci_archive import oci_archive

NAMESPACE_PREFIX = "radium-test"


class Containerd:
    def __init__(self, env: dict[str, str], config: Path | None = None) -> None:
        self.binary = need("containerd")
        self.ctr_binary = need("ctr", "containerd")
        need("containerd-shim-runc-v2", "containerd")
        self.root = Path(tempfile.mkdtemp(prefix="rcd-", dir="/tmp"))
        self.socket = self.root / "c.sock"
        # runc keeps its state in /run/containerd/runc/<namespace>, outside --root and --state:
        # a namespace of our own keeps a run killed mid-test from colliding with the next one.
        # (containerd allows no '_' at the edges of a name's parts; mkdtemp may put one there)
        suffix = self.root.name.removeprefix("rcd-").replace("_", "u")
        self.namespace = f"{NAMESPACE_PREFIX}-{suffix}"
        self.config = config
        self.env = env
        self.process: subprocess.Popen[bytes] | None = None
        self._images: set[tuple[str, str]] = set()

    def command(self, *extra: str) -> list[str]:
        config = str(self.config) if self.config else "/dev/null"
        return [
            self.binary,
            "--config",
            config,
            "--root",
            str(self.root / "root"),
            "--state",
            str(self.root / "state"),
            "--address",
            str(self.socket),
            *extra,
        ]

    def start(self, timeout: float = 60) -> None:
        self.process = start_daemon(
            "containerd",
            self.command(),
            self.env,
            self.root / "containerd.log",
            lambda: self.socket.exists() and self.ctr("version", check=False).returncode == 0,
            timeout,
        )

    def log_tail(self) -> str:
        return log_tail(self.root / "containerd.log")

    def ctr(
        self, *args: str, check: bool = True, timeout: float = 180, namespace: str = ""
    ) -> subprocess.CompletedProcess[str]:
        """``ctr`` in this daemon's namespace, or ``namespace`` (the CRI plugin's is k8s.io)."""
        result = subprocess.run(
            [
                self.ctr_binary,
                "--address",
                str(self.socket),
                "--namespace",
                namespace or self.namespace,
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=self.env,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"ctr {' '.join(args)} failed ({result.returncode}):\n"
                f"{result.stderr}\n{self.log_tail()}"
            )
        return result

    def import_image(
        self,
        rootfs_tar: Path,
        name: str,
        *,
        namespace: str = "",
        entrypoint: list[str] | None = None,
    ) -> str:
        if (namespace, name) not in self._images:
            archive = oci_archive(rootfs_tar, name, entrypoint=entrypoint)
            self.ctr("images", "import", str(archive), timeout=600, namespace=namespace)
            self._images.add((namespace, name))
        return name

    def task_dirs(self) -> list[str]:
        """Bundles containerd still keeps for this namespace."""
        tasks = self.root / "state" / "io.containerd.runtime.v2.task" / self.namespace
        return sorted(os.listdir(tasks)) if tasks.exists() else []

    def shim_pids(self) -> list[int]:
        """containerd-shim-runc-v2 processes serving this containerd."""
        needle = str(self.socket).encode()
        pids = []
        for pid_dir in Path("/proc").iterdir():
            if pid_dir.name.isdigit():
                try:
                    cmdline = (pid_dir / "cmdline").read_bytes()
                except OSError:
                    continue
                if b"containerd-shim" in cmdline and needle in cmdline:
                    pids.append(int(pid_dir.name))
        return pids

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            for task in self.ctr("tasks", "ls", "-q", check=False).stdout.split():
                self.ctr("tasks", "kill", "-s", "SIGKILL", task, check=False)
                self.ctr("tasks", "delete", "-f", task, check=False)
            for container in self.ctr("containers", "ls", "-q", check=False).stdout.split():
                self.ctr("containers", "delete", container, check=False)
        stop_daemon(self.process, self.root)
        # runc's state for our namespace lives outside --root/--state; it is empty by now.
        with contextlib.suppress(OSError):
            os.rmdir(f"/run/containerd/runc/{self.namespace}")
