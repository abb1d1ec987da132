"""A fresh Debian root to install a .deb into, and commands run chrooted in it (test_deb).

The root is ``debootstrap --variant=minbase`` of a suite with the packages asked for (the
.deb's Depends), cached as a tar under ``images.CACHE_DIR`` keyed by suite, packages and
mirror, and built with the same locking, stripping and packing as :mod:`integration.images`.

Commands run in the root through :func:`chroot`: in mount, PID and network namespaces of their
own, so the ``/proc`` and ``/dev`` mounted for them vanish with the command however it ends
(a failed assertion, a timeout, a killed test run) and never show on the host.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from integration import images
from integration.images import ImageBuildError

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
    dest = images._cache_dir() / f"{name}.tar"
    if dest.is_file():
        return dest
    with images._locked(name):
        if dest.is_file():
            return dest
        images._clean_stale(f".build-{name}-")
        images._clean_stale(f".{name}.tar.tmp-")
        started = time.monotonic()
        _debootstrap(suite, packages, name, dest)
        images.log.info("built %s in %.0fs", dest, time.monotonic() - started)
    return dest


def _debootstrap(suite: str, packages: list[str], name: str, dest: Path) -> None:
    work = Path(tempfile.mkdtemp(prefix=f".build-{name}-", dir=images._cache_dir()))
    rootfs = work / "rootfs"
    argv = [images._which("debootstrap"), "--variant=minbase"]
    if packages:
        argv.append(f"--include={','.join(packages)}")
    if images._DEBIAN_KEYRING.is_file():
        argv.append(f"--keyring={images._DEBIAN_KEYRING}")
    argv += [suite, str(rootfs), images.MIRROR]
    env = {"PATH": CHROOT_ENV["PATH"], "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": "/root"}
    env["DEBIAN_FRONTEND"] = "noninteractive"
    for var in ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        if var in os.environ:
            env[var] = os.environ[var]
    try:
        try:
            images._run(argv, env=env)
        except ImageBuildError as exc:
            logfile = rootfs / "debootstrap" / "debootstrap.log"
            if logfile.is_file():
                tail = images._tail(logfile.read_text(errors="replace"))
                raise ImageBuildError(f"{exc}\n--- {logfile} (tail):\n{tail}") from exc
            raise
        leftover = images._mounts_under(rootfs)
        if leftover:
            raise ImageBuildError(f"debootstrap left mounts: {', '.join(map(str, leftover))}")
        images._strip_rootfs(rootfs)
        images._pack(rootfs, dest, exclude=("./dev/*", "./proc/*", "./sys/*", "./debootstrap"))
    finally:
        images._remove_tree(work)


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
