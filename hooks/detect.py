"""Find out what a container image is: distribution, libc, architecture and Python interpreters.

Detection reads the rootfs only through :mod:`radium.hooks.safepath`. ``distro`` is given a
private copy of the few release files it reads, because it follows symlinks with plain ``open``
and an image's ``/etc/os-release`` may point anywhere on the host.

Fallback for images without os-release (busybox, scratch): the distribution id is ``"unknown"``,
the libc comes from the dynamic loader present (``"none"`` for a static image) and the
architecture from the loader's name, else the host's.
"""

from __future__ import annotations

import logging
import platform
import re
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import distro

from radium.hooks import safepath

__all__ = [
    "UNKNOWN",
    "Platform",
    "Python",
    "detect",
    "detect_distribution",
    "detect_libc",
    "detect_pythons",
]

log = logging.getLogger(__name__)

UNKNOWN = "unknown"
_RELEASE_FILE = re.compile(r"^[\w-]+[-_](release|version)$")
_MAX_RELEASE_FILES = 16
_LOADER_DIRS = ("lib", "lib64", "usr/lib", "usr/lib64")
_MUSL_LOADER = re.compile(r"^ld-musl-([\w]+)\.so\.1$")
_GLIBC_LOADER = re.compile(r"^ld-linux-?([\w-]*)\.so\.\d$")
_GLIBC_ARCH = {"x86-64": "x86_64", "aarch64": "aarch64", "armhf": "armhf", "": "i386"}
_INTERPRETER = re.compile(r"^python(3\.\d+)$")
#: Where interpreters live, with the site directories each reads, best first ({v} = "3.11").
_PYTHON_PREFIXES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "usr/local/bin",
        ("usr/local/lib/python{v}/site-packages", "usr/local/lib/python{v}/dist-packages"),
    ),
    (
        "usr/bin",
        (
            "usr/lib/python3/dist-packages",
            "usr/lib/python{v}/site-packages",
            "usr/lib64/python{v}/site-packages",
        ),
    ),
    ("opt/conda/bin", ("opt/conda/lib/python{v}/site-packages",)),
)


@dataclass(frozen=True)
class Python:
    """One interpreter of the image and the site directory it reads ``.pth`` files from."""

    path: str
    version: str
    site_dir: str


@dataclass(frozen=True)
class Platform:
    """What the hook learned about an image."""

    distro_id: str
    distro_version: str
    distro_like: tuple[str, ...]
    pretty_name: str
    libc: str
    arch: str
    pythons: tuple[Python, ...] = field(default=())

    @property
    def site_dirs(self) -> tuple[str, ...]:
        """Distinct site directories, in interpreter order."""
        return tuple(dict.fromkeys(p.site_dir for p in self.pythons))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def detect(root_fd: int, scratch: Path) -> Platform:
    """Detect everything about the rootfs behind ``root_fd``; ``scratch`` must not exist yet."""
    distro_id, version, like, pretty = detect_distribution(root_fd, scratch)
    libc, arch = detect_libc(root_fd)
    return Platform(
        distro_id=distro_id,
        distro_version=version,
        distro_like=like,
        pretty_name=pretty,
        libc=libc,
        arch=arch,
        pythons=detect_pythons(root_fd),
    )


def detect_distribution(root_fd: int, scratch: Path) -> tuple[str, str, tuple[str, ...], str]:
    """(id, version, like, pretty name) via ``distro`` on a copy of the release files.

    The copy goes to ``scratch``, a root-only directory that is created and removed here.
    """
    etc = scratch / "etc"
    etc.mkdir(parents=True, mode=0o700)
    try:
        os_release = safepath.read_text(root_fd, "etc/os-release")
        if os_release is None:
            os_release = safepath.read_text(root_fd, "usr/lib/os-release")
        if os_release is not None:
            (etc / "os-release").write_text(os_release, encoding="utf-8")
        names = sorted(n for n in safepath.list_dir(root_fd, "etc") if _RELEASE_FILE.match(n))
        for name in names[:_MAX_RELEASE_FILES]:
            text = safepath.read_text(root_fd, f"etc/{name}", limit=4096)
            if text is not None and name != "os-release":
                (etc / name).write_text(text, encoding="utf-8")
        info = distro.LinuxDistribution(
            root_dir=str(scratch), include_lsb=False, include_uname=False, include_oslevel=False
        )
        distro_id = info.id() or UNKNOWN
        like = tuple(info.like().split())
        return distro_id, info.version(), like, info.name(pretty=True) or distro_id
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def detect_libc(root_fd: int) -> tuple[str, str]:
    """(libc family, arch) from the dynamic loader the image ships."""
    for directory in _LOADER_DIRS:
        for name in sorted(safepath.list_dir(root_fd, directory)):
            musl = _MUSL_LOADER.match(name)
            if musl:
                return "musl", musl.group(1)
            glibc = _GLIBC_LOADER.match(name)
            if glibc and safepath.exists(root_fd, f"{directory}/{name}"):
                return "glibc", _GLIBC_ARCH.get(glibc.group(1), glibc.group(1))
    return "none", platform.machine()


def detect_pythons(root_fd: int) -> tuple[Python, ...]:
    """Every python3.X interpreter with an existing site directory."""
    found: list[Python] = []
    seen: set[str] = set()
    for bin_dir, site_templates in _PYTHON_PREFIXES:
        versions = sorted(
            (m.group(1) for m in map(_INTERPRETER.match, safepath.list_dir(root_fd, bin_dir)) if m),
            key=lambda v: tuple(int(x) for x in v.split(".")),
            reverse=True,
        )
        for version in versions:
            path = f"{bin_dir}/python{version}"
            try:
                canonical = safepath.real_path(root_fd, path)
            except OSError:
                continue
            if canonical in seen:
                continue
            seen.add(canonical)
            for template in site_templates:
                site = template.format(v=version)
                if safepath.exists(root_fd, site, kind="dir"):
                    found.append(Python(path=f"/{path}", version=version, site_dir=f"/{site}"))
                    break
            else:
                log.info("interpreter /%s has no site directory; skipped", path)
    return tuple(found)
