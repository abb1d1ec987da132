"""Root filesystems for the integration tests (docs/design.md section 7).

The integration tests run real runc / dockerd / containerd / podman, so they need
real root filesystems to import as images:

* ``debian_tar(suite)``: a minimal Debian (bullseye, bookworm, trixie) with
  ``python3`` -- three distributions, three Python versions (3.9, 3.11, 3.13);
  optionally with ``python3-numpy``.  Built with ``debootstrap`` from
  deb.debian.org and cached as an uncompressed tar.
* ``alpine_tar()``: the Alpine (musl) minirootfs kept in this repository
  (``tests/fixtures/alpine``, with its ``SHA512SUMS``, source and licences;
  ``$RADIUM_FIXTURES`` names another directory), checked against ``SHA512SUMS``.
* ``busybox_tar()``: a "no distro" rootfs: a static busybox and its applet
  links, no ``/etc/os-release``, no python.

Tars are cached under ``CACHE_DIR`` (``$RADIUM_TEST_CACHE``, default
``/var/cache/radium-tests``), written atomically and built under an ``fcntl``
lock so concurrent callers (e.g. pytest-xdist workers) build each image once.

CLI: ``python -m integration.images build [--numpy]``.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import functools
import hashlib
import logging
import os
import re
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator, Sequence

from integration.progress_lines import debootstrap_step, run_with_steps, say

__all__ = [
    "CACHE_DIR",
    "SUITES",
    "ImageBuildError",
    "alpine_tar",
    "busybox_tar",
    "debian_built",
    "debian_tar",
    "extract",
    "python_version",
]

log = logging.getLogger(__name__)

CACHE_DIR: Path = Path(os.environ.get("RADIUM_TEST_CACHE", "/var/cache/radium-tests"))
SUITES = ("bullseye", "bookworm", "trixie")

MIRROR = "http://deb.debian.org/debian"
ALPINE_TARBALL = "alpine-minirootfs-3.20.3-x86_64.tar.gz"
_DEBIAN_KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
_HOST_BUSYBOX = Path("/bin/busybox")
_EXPECTED_PYTHON = {"bullseye": "3.9", "bookworm": "3.11", "trixie": "3.13"}
# Extra places searched for tools: root's sbin dirs are not always on PATH.
_EXTRA_PATH = ("/usr/local/sbin", "/usr/sbin", "/sbin")
_STDERR_TAIL_LINES = 25
# Removed from debootstrapped trees before packing (relative to the rootfs root):
# the contents of these directories, not the directories themselves.
_STRIP_DIR_CONTENTS = (
    "var/cache/apt/archives",
    "var/lib/apt/lists",
    "usr/share/doc",
    "usr/share/man",
    "usr/share/info",
    "usr/share/lintian",
    "usr/share/linda",
)
_STRIP_GLOBS = (
    "var/cache/apt/*.bin",
    "var/cache/debconf/*-old",
    "var/lib/dpkg/*-old",
    "var/log/apt/*",
    "var/log/*.log",
)
_BUSYBOX_DIRS = ("bin", "proc", "sys", "dev", "tmp", "etc", "run")


class ImageBuildError(Exception):
    """An image could not be built, found or verified."""


# --------------------------------------------------------------------------- helpers


def _tail(text: str, lines: int = _STDERR_TAIL_LINES) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _which(tool: str) -> str:
    path = os.pathsep.join([os.environ.get("PATH", os.defpath), *_EXTRA_PATH])
    found = shutil.which(tool, path=path)
    if found is None:
        hint = f" (apt-get install -y {tool})" if tool in ("debootstrap", "tar") else ""
        raise ImageBuildError(f"required tool {tool!r} not found{hint}")
    return found


def _run(
    args: Sequence[str], *, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``args`` (no shell), raising ImageBuildError with the stderr tail on failure."""
    argv = list(args)
    log.debug("running %s", argv)
    try:
        return subprocess.run(
            argv,
            check=True,
            capture_output=True,
            text=True,
            errors="replace",
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError as exc:
        raise ImageBuildError(f"{argv[0]}: not found ({exc})") from exc
    except subprocess.CalledProcessError as exc:
        detail = _tail(exc.stderr or "") or _tail(exc.stdout or "")
        raise ImageBuildError(
            f"command failed with exit status {exc.returncode}: {' '.join(argv)}\n{detail}"
        ) from exc


def _cache_dir() -> Path:
    try:
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ImageBuildError(f"cannot create cache directory {CACHE_DIR}: {exc}") from exc
    return CACHE_DIR


@contextlib.contextmanager
def _locked(name: str) -> Iterator[None]:
    """Hold an exclusive fcntl lock named ``name`` in the cache directory."""
    lock_path = _cache_dir() / f".{name}.lock"
    with open(lock_path, "a+") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say("images", f"waiting for another process building {name}")
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _unescape_mountinfo(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _mounts_under(root: Path) -> list[Path]:
    """Mount points at or below ``root`` (deepest first)."""
    root = Path(os.path.realpath(root))
    found: list[Path] = []
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                fields = line.split()
                if len(fields) < 5:
                    continue
                point = Path(_unescape_mountinfo(fields[4]))
                if point == root or root in point.parents:
                    found.append(point)
    except OSError:  # pragma: no cover - /proc always exists on the test hosts
        return []
    return sorted(set(found), key=lambda p: len(p.parts), reverse=True)


def _remove_tree(path: Path) -> None:
    """Remove a (partial) rootfs, unmounting anything debootstrap left mounted in it.

    Refuses to delete while something is still mounted below ``path``: recursing
    into a bind-mounted /dev or /sys would delete host files.
    """
    if not path.exists() and not path.is_symlink():
        return
    for point in _mounts_under(path):
        log.warning("unmounting leftover mount %s", point)
        with contextlib.suppress(ImageBuildError):
            _run([_which("umount"), "--lazy", str(point)])
    remaining = _mounts_under(path)
    if remaining:
        raise ImageBuildError(
            f"not removing {path}: still mounted: {', '.join(map(str, remaining))}"
        )
    shutil.rmtree(path, ignore_errors=True)


def _clean_stale(prefix: str) -> None:
    """Remove leftovers of killed builds (called with the image lock held)."""
    for stale in _cache_dir().glob(f"{prefix}*"):
        log.info("removing stale build leftover %s", stale)
        try:
            if stale.is_dir() and not stale.is_symlink():
                _remove_tree(stale)
            else:
                stale.unlink()
        except (OSError, ImageBuildError) as exc:
            log.warning("could not remove %s: %s", stale, exc)


def _pack(rootfs: Path, dest: Path, *, exclude: Sequence[str] = ()) -> None:
    """Pack the contents of ``rootfs`` into the tar ``dest``, atomically."""
    tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
    argv = [
        _which("tar"),
        "--create",
        "--file",
        str(tmp),
        "--numeric-owner",
        "--one-file-system",
        "--sort=name",
        "--directory",
        str(rootfs),
    ]
    argv += [f"--exclude={pattern}" for pattern in exclude]
    argv.append(".")
    try:
        _run(argv)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, dest)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    log.info("wrote %s (%.1f MiB)", dest, dest.stat().st_size / 2**20)


def _strip_rootfs(rootfs: Path) -> None:
    """Drop apt caches, package lists, docs and logs from a debootstrapped tree."""
    for rel in _STRIP_DIR_CONTENTS:
        top = rootfs / rel
        if not top.is_dir() or top.is_symlink():
            continue
        for child in top.iterdir():
            if child.is_dir() and not child.is_symlink():
                if rel.startswith("var/") and child.name == "partial":
                    # apt expects these to exist; empty them instead.
                    for sub in child.iterdir():
                        sub.unlink()
                    continue
                shutil.rmtree(child)
            else:
                child.unlink()
    for pattern in _STRIP_GLOBS:
        for match in rootfs.glob(pattern):
            if match.is_file() or match.is_symlink():
                match.unlink()


# --------------------------------------------------------------------------- Debian


def debian_tar(suite: str, *, with_numpy: bool = False) -> Path:
    """A minimal Debian ``suite`` rootfs with python3 (and numpy) as a cached tar.

    Built with ``debootstrap --variant=minbase`` from deb.debian.org on first use.
    The tar holds the rootfs contents with paths relative to its root
    (``./usr/bin/python3``), numeric owners and no device nodes, ready for
    ``docker import`` / ``ctr image import``-style use.
    """
    if suite not in SUITES:
        raise ValueError(f"unknown suite {suite!r}; expected one of {', '.join(SUITES)}")
    include = ["python3"] + (["python3-numpy"] if with_numpy else [])
    return minbase_tar(suite, include, _debian_name(suite, with_numpy))


def _debian_name(suite: str, with_numpy: bool) -> str:
    return f"debian-{suite}{'-numpy' if with_numpy else ''}"


def debian_built(suite: str, *, with_numpy: bool = False) -> bool:
    """Whether :func:`debian_tar` has the tar in its cache (else it builds it: minutes)."""
    return (CACHE_DIR / f"{_debian_name(suite, with_numpy)}.tar").is_file()


def minbase_tar(suite: str, include: Sequence[str], name: str) -> Path:
    """``debootstrap --variant=minbase`` of ``suite`` with ``include``, as the cached tar
    ``name`` (built on first use, once however many tests ask at the same time)."""
    dest = _cache_dir() / f"{name}.tar"
    if dest.is_file():
        return dest
    with _locked(name):
        if dest.is_file():  # built by someone else while we waited
            return dest
        _clean_stale(f".build-{name}-")
        _clean_stale(f".{name}.tar.tmp-")
        started = time.monotonic()
        say(
            "images",
            f"building {name}: debootstrap of Debian {suite} with {', '.join(include)} "
            "(about 2 minutes the first time)...",
        )
        _build_debian(suite, list(include), dest)
        say("images", f"built {dest} in {time.monotonic() - started:.0f}s")
    return dest


def _build_debian(suite: str, include: list[str], dest: Path) -> None:
    if os.geteuid() != 0:
        raise ImageBuildError("debootstrap must run as root")
    debootstrap = _which("debootstrap")
    work = Path(tempfile.mkdtemp(prefix=f".build-{dest.stem}-", dir=_cache_dir()))
    rootfs = work / "rootfs"
    argv = [debootstrap, "--variant=minbase"]
    if include:
        argv.append(f"--include={','.join(include)}")
    if _DEBIAN_KEYRING.is_file():
        argv.append(f"--keyring={_DEBIAN_KEYRING}")
    argv += [suite, str(rootfs), MIRROR]
    env = {
        "PATH": os.pathsep.join(
            ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
        ),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "DEBIAN_FRONTEND": "noninteractive",
        "HOME": "/root",
    }
    for var in ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        if var in os.environ:
            env[var] = os.environ[var]
    try:
        log.debug("debootstrapping %s (include=%s) into %s", suite, ",".join(include), rootfs)
        _debootstrap(argv, env, rootfs, dest.stem)
        leftover = _mounts_under(rootfs)
        if leftover:
            raise ImageBuildError(
                f"debootstrap left mounts behind: {', '.join(map(str, leftover))}"
            )
        if "python3" in include and not (rootfs / "usr" / "bin" / "python3").exists():
            raise ImageBuildError(f"debootstrap of {suite} produced no usr/bin/python3")
        _strip_rootfs(rootfs)
        say("images", f"{dest.stem}: packing {dest.name}")
        _pack(rootfs, dest, exclude=("./dev/*", "./proc/*", "./sys/*", "./debootstrap"))
    finally:
        _remove_tree(work)


def _debootstrap(argv: list[str], env: dict[str, str], rootfs: Path, name: str) -> None:
    """Run debootstrap, one line per step of it on stderr; its failure with its log's tail."""
    try:
        status, tail = run_with_steps(
            argv, env=env, show=lambda line: say("images", f"{name}: {line}"), step=debootstrap_step
        )
    except OSError as exc:
        raise ImageBuildError(f"{argv[0]}: {exc}") from exc
    if status == 0:
        return
    detail = _tail("\n".join(tail))
    logfile = rootfs / "debootstrap" / "debootstrap.log"
    if logfile.is_file():
        detail += f"\n--- {logfile} (tail):\n{_tail(logfile.read_text(errors='replace'))}"
    raise ImageBuildError(f"command failed with exit status {status}: {' '.join(argv)}\n{detail}")


def _python_from_tar(tar: Path) -> str | None:
    link: str | None = None
    libs: set[str] = set()
    lib_re = re.compile(r"^(?:\./)?usr/lib/python(3\.\d+)/os\.py$")
    try:
        with tarfile.open(tar, "r:") as tf:
            for member in tf:
                name = member.name
                if name in ("usr/bin/python3", "./usr/bin/python3") and member.issym():
                    link = member.linkname
                match = lib_re.match(name)
                if match:
                    libs.add(match.group(1))
    except (OSError, tarfile.TarError) as exc:
        raise ImageBuildError(f"cannot read {tar}: {exc}") from exc
    if link is not None:
        match = re.search(r"python(3\.\d+)$", link)
        if match and (not libs or match.group(1) in libs):
            return match.group(1)
    if len(libs) == 1:
        return libs.pop()
    return None


def python_version(suite: str) -> str:
    """The ``major.minor`` python3 version of the Debian ``suite`` image.

    Read from the image itself (building it if needed): the target of
    ``usr/bin/python3`` and the ``usr/lib/python3.X`` standard library.
    """
    tar = debian_tar(suite)
    version = _python_from_tar(tar)
    if version is None:
        raise ImageBuildError(f"cannot determine the python3 version in {tar}")
    expected = _EXPECTED_PYTHON.get(suite)
    if expected is not None and version != expected:
        log.warning("%s has python %s, expected %s", tar, version, expected)
    return version


# --------------------------------------------------------------------------- Alpine


def _fixtures_dir() -> Path:
    """Where the Alpine tarball and its ``SHA512SUMS`` are: ``$RADIUM_FIXTURES``, else the
    repository's own copy, so a fresh clone runs the suite with nothing beside it."""
    override = os.environ.get("RADIUM_FIXTURES")
    if override:
        return Path(override)
    repo_root = Path(__file__).resolve().parent.parent
    return repo_root / "tests" / "fixtures" / "alpine"


def _sha512(path: Path) -> str:
    digest = hashlib.sha512()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def alpine_tar() -> Path:
    """The Alpine (musl) minirootfs fixture, verified against ``SHA512SUMS``.

    Returns the ``.tar.gz`` itself: ``docker import`` and ``tar -xf`` accept it.
    """
    fixtures = _fixtures_dir()
    tarball = fixtures / ALPINE_TARBALL
    sums = fixtures / "SHA512SUMS"
    if not tarball.is_file():
        raise ImageBuildError(
            f"Alpine fixture {tarball} is missing; see tests/fixtures/alpine/README.md"
        )
    try:
        sums_text = sums.read_text()
    except OSError as exc:
        raise ImageBuildError(f"cannot read {sums}: {exc}") from exc
    expected: str | None = None
    for line in sums_text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("*") == ALPINE_TARBALL:
            expected = parts[0].lower()
            break
    if expected is None:
        raise ImageBuildError(f"{sums} has no entry for {ALPINE_TARBALL}")
    actual = _sha512(tarball)
    if actual != expected:
        raise ImageBuildError(f"SHA-512 mismatch for {tarball}: expected {expected}, got {actual}")
    return tarball


# --------------------------------------------------------------------------- busybox


def _is_static_elf(path: Path) -> bool:
    """True if ``path`` is an ELF64 little-endian executable without PT_INTERP."""
    with open(path, "rb") as fh:
        header = fh.read(64)
        if len(header) < 64 or header[:4] != b"\x7fELF" or header[4] != 2 or header[5] != 1:
            return False
        (phoff,) = struct.unpack_from("<Q", header, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", header, 0x36)
        fh.seek(phoff)
        table = fh.read(phentsize * phnum)
    for i in range(phnum):
        (p_type,) = struct.unpack_from("<I", table, i * phentsize)
        if p_type == 3:  # PT_INTERP: dynamically linked
            return False
    return True


def busybox_tar() -> Path:
    """A "no distro" rootfs: static busybox + applet links, no os-release, no python."""
    name = "busybox"
    dest = _cache_dir() / f"{name}.tar"
    if dest.is_file():
        return dest
    hint = "install it with: apt-get install -y busybox-static"
    if not _HOST_BUSYBOX.is_file():
        raise ImageBuildError(f"{_HOST_BUSYBOX} not found; {hint}")
    if not _is_static_elf(_HOST_BUSYBOX):
        raise ImageBuildError(f"{_HOST_BUSYBOX} is not a static x86_64 binary; {hint}")
    with _locked(name):
        if dest.is_file():
            return dest
        _clean_stale(f".build-{name}-")
        _clean_stale(f".{name}.tar.tmp-")
        applets = _run([str(_HOST_BUSYBOX), "--list"]).stdout.split()
        work = Path(tempfile.mkdtemp(prefix=f".build-{name}-", dir=_cache_dir()))
        try:
            rootfs = work / "rootfs"
            for sub in _BUSYBOX_DIRS:
                (rootfs / sub).mkdir(parents=True, exist_ok=True)
            os.chmod(rootfs, 0o755)
            os.chmod(rootfs / "tmp", 0o1777)
            shutil.copy2(_HOST_BUSYBOX, rootfs / "bin" / "busybox")
            os.chmod(rootfs / "bin" / "busybox", 0o755)
            for applet in sorted(set(applets)):
                if applet == "busybox" or "/" in applet or applet in (".", ".."):
                    continue
                (rootfs / "bin" / applet).symlink_to("busybox")
            _pack(rootfs, dest)
        finally:
            _remove_tree(work)
    return dest


# --------------------------------------------------------------------------- extract


def extract(tar: Path, dest: Path) -> Path:
    """Extract ``tar`` (.tar or .tar.gz) into ``dest`` (created) and return ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    _run(
        [
            _which("tar"),
            "--extract",
            "--file",
            str(tar),
            "--numeric-owner",
            "--directory",
            str(dest),
        ]
    )
    return dest


# --------------------------------------------------------------------------- CLI


def _size(path: Path) -> str:
    return f"{path.stat().st_size / 2**20:.1f} MiB"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m integration.images",
        description="Build and cache the root filesystems used by the integration tests.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build (or verify) every image")
    build.add_argument("--numpy", action="store_true", help="also build the numpy variants")
    build.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    args = parser.parse_args(argv)

    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    jobs: list[tuple[str, Callable[[], Path]]] = []
    for suite in SUITES:
        jobs.append((f"debian-{suite}", functools.partial(debian_tar, suite)))
        if args.numpy:
            jobs.append(
                (f"debian-{suite}-numpy", functools.partial(debian_tar, suite, with_numpy=True))
            )
    jobs.append(("alpine", alpine_tar))
    jobs.append(("busybox", busybox_tar))

    failed = 0
    for label, job in jobs:
        started = time.monotonic()
        try:
            path = job()
        except ImageBuildError as exc:
            failed += 1
            print(f"{label:<22} FAILED: {exc}", file=sys.stderr)
            continue
        elapsed = time.monotonic() - started
        extra = ""
        if label.startswith("debian-") and not label.endswith("-numpy"):
            extra = f"  python {python_version(label.split('-', 1)[1])}"
        print(f"{label:<22} {path}  {_size(path)}  ({elapsed:.1f}s){extra}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
