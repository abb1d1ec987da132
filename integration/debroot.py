"""A fresh Debian root to install a .deb into, and commands run chrooted in it (test_deb).

The root is ``debootstrap --variant=minbase`` of a suite with the packages asked for (the
.deb's Depends), built and cached by :func:`integration.images.minbase_tar`, keyed by suite,
packages and mirror.

Commands run in the root through :func:`chroot`: in mount, PID and network namespaces of their
own, so the ``/proc`` and ``/dev`` mounted for them vanish with the command however it ends
(a failed assertion, a timeout, a killed test run) and never show on the host.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Sequence
from pathlib import Path

from integration import images

#: Device nodes maintainer scripts and Python expect; bound from the host's /dev.
_DEVICES = ("null", "zero", "full", "random", "urandom")
#: Mounts /proc and a small /dev in the root, then chroots ($1: the root; the rest: argv).
_ENTER = f"""
set -e
root=$1
shift
mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
mount -t tmpfs -o nosuid,mode=0755 radium-test-dev "$root/dev"
for node in {" ".join(_DEVICES)}; do
    touch "$root/dev/$node"
    mount --bind "/dev/$node" "$root/dev/$node"
done
ln -s /proc/self/fd "$root/dev/fd"
exec chroot "$root" "$@"
"""
CHROOT_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "LANG": "C.UTF-8",
    "DEBIAN_FRONTEND": "noninteractive",
}


def root_tar(suite: str, include: Sequence[str]) -> Path:
    """A minbase ``suite`` root with ``include`` installed, as a cached tar (built on first use)."""
    packages = sorted(set(include))
    params = json.dumps([suite, "minbase", packages, images.MIRROR])
    name = f"debian-{suite}-minbase-{hashlib.sha256(params.encode()).hexdigest()[:12]}"
    return images.minbase_tar(suite, packages, name)


def chroot(
    root: Path, *argv: str, timeout: float = 300, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` chrooted in ``root`` (no network, its own /proc and /dev); never raises on
    a non-zero exit."""
    return subprocess.run(
        [
            "unshare", "--mount", "--propagation", "private", "--pid", "--fork", "--net",
            "sh", "-c", _ENTER, "enter", str(root), *argv,
        ],
        env=CHROOT_ENV,
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=timeout,
        check=False,
    )  # fmt: skip
