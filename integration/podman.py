"""podman for tests: private storage, cgroupfs, runc, no network; hooks from a hooks.d dir."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from integration.host import kill_processes_under, need, unmount_all_under

# The sandbox caps RLIMIT_NOFILE/NPROC below podman's defaults, which runc then fails to set.
ULIMITS = ("--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024")


class Podman:
    def __init__(self, hooks_dir: Path, env: dict[str, str]) -> None:
        self.binary = need("podman")
        self.root = Path(tempfile.mkdtemp(prefix="rpm-", dir="/tmp"))
        self.hooks_dir = hooks_dir
        self.env = {**env, "HOME": str(self.root)}

    def podman(
        self, *args: str, check: bool = True, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        argv = [
            self.binary,
            "--root",
            str(self.root / "root"),
            "--runroot",
            str(self.root / "run"),
            "--tmpdir",
            str(self.root / "tmp"),
            "--cgroup-manager",
            "cgroupfs",
            "--runtime",
            need("runc"),
            "--events-backend",
            "file",
            "--hooks-dir",
            str(self.hooks_dir),
            *args,
        ]
        result = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, check=False, env=self.env
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"podman {' '.join(args)} failed ({result.returncode}):\n{result.stderr}"
            )
        return result

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.podman("run", "--rm", "--network", "none", *ULIMITS, *args, check=check)

    def stop(self) -> None:
        self.podman("rm", "-af", check=False)
        kill_processes_under(self.root)
        unmount_all_under(self.root)
        shutil.rmtree(self.root, ignore_errors=True)
