"""Facts about the host that tests compare before and after: mounts, file hashes, processes."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable

import psutil
import pytest


def need(tool: str, package: str = "") -> str:
    """The path of ``tool``; a missing tool FAILS the test (never skips), saying what to install."""
    path = shutil.which(tool)
    if path is None:
        pytest.fail(f"{tool} is not installed: apt-get install {package or tool}", pytrace=False)
    return path


def need_root() -> None:
    if os.geteuid() != 0:
        pytest.fail(
            "integration tests run as root (they start runc, dockerd, mounts)", pytrace=False
        )


def mount_table() -> list[str]:
    """The host's mount table as the test process sees it."""
    return Path("/proc/self/mountinfo").read_text().splitlines()


def mounts_under(path: Path) -> list[str]:
    prefix = str(path)
    points = [line.split()[4] for line in mount_table()]
    return [p for p in points if p == prefix or p.startswith(prefix + "/")]


def unmount_all_under(path: Path) -> None:
    """Lazily unmount everything below ``path``, deepest first (test cleanup)."""
    for point in sorted(mounts_under(path), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], check=False, capture_output=True)


def tree_digest(*paths: Path, depth: int = 64) -> dict[str, str]:
    """sha256 of every regular file, and the target of every symlink, under ``paths``.

    The listing itself is part of the result, so a new or removed entry changes it. ``depth``
    bounds the walk (1 = the entries directly under each path).
    """
    result: dict[str, str] = {}
    for top in paths:
        for dirpath, dirnames, filenames in os.walk(top):
            if len(Path(dirpath).relative_to(top).parts) >= depth:
                dirnames[:] = []
            for name in filenames + dirnames:
                path = Path(dirpath, name)
                if path.is_symlink():
                    result[str(path)] = "-> " + os.readlink(path)
                elif path.is_file():
                    try:
                        result[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
                    except OSError:
                        result[str(path)] = "unreadable"
                else:
                    result[str(path)] = "dir" if path.is_dir() else "special"
    return result


def log_tail(path: Path, lines: int = 40) -> str:
    """The last lines of a daemon's log, for failure messages."""
    return (
        "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""
    )


def start_daemon(
    name: str,
    argv: list[str],
    env: dict[str, str],
    log: Path,
    ready: Callable[[], bool],
    timeout: float,
) -> subprocess.Popen[bytes]:
    """Start a daemon logging to ``log`` and wait until ``ready()``; fail with its log tail."""
    with open(log, "ab") as handle:
        process = subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited early:\n{log_tail(log)}")
        if ready():
            return process
        time.sleep(0.2)
    process.kill()
    raise RuntimeError(f"{name} did not come up in {timeout}s:\n{log_tail(log)}")


def running(process: psutil.Process) -> bool:
    """Still running: exited (even as an unreaped zombie) is not running."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def kill_processes_under(path: Path) -> None:
    """SIGKILL every process whose command line mentions ``path`` (leftover shims, containerd)."""
    needle = str(path).encode()
    for pid_dir in Path("/proc").iterdir():
        if not pid_dir.name.isdigit() or int(pid_dir.name) == os.getpid():
            continue
        try:
            if needle in (pid_dir / "cmdline").read_bytes():
                os.kill(int(pid_dir.name), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            continue


def stop_daemon(process: subprocess.Popen[bytes] | None, root: Path) -> None:
    """Stop a daemon started by start_daemon, then whatever it left under ``root``."""
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    kill_processes_under(root)
    unmount_all_under(root)
    shutil.rmtree(root, ignore_errors=True)
