"""Fake container root filesystems for unit tests of distro / libc / python detection.

Each :class:`RootSpec` describes one real-world image closely enough for a detector that only
looks at the filesystem: the verbatim ``os-release`` file (and whether ``/etc/os-release`` is a
relative symlink into ``/usr/lib``), the dynamic loader, the merged-``/usr`` layout, the python
interpreters and the site directories they read ``.pth`` files from.  :func:`build_root` turns a
spec into a directory tree of empty files and relative symlinks.

The ``os-release`` texts are the files as shipped (taken from the images / release packages of
the point release named in each constant).  ``expected_id`` / ``expected_version`` /
``expected_like`` are what ``distro.LinuxDistribution(root_dir=...)`` (distro 1.9) returns for
them; ``tests/test_distro_roots.py`` checks that.  Note that ``distro`` normalises the os-release
``ID`` ``opensuse-leap`` to ``opensuse``.

Files that real images also have but that no spec field covers (``/etc/debian_version``,
``/etc/redhat-release``, ``/etc/alpine-release``, libc itself, ``/usr/bin/python`` ...) are not
created.  Images whose base does not ship python (debian, ubuntu, alpine, arch, opensuse) are
modelled "with the distribution's python3 package installed".

Import as ``from tests.distro_roots import ROOTS, RootSpec, build_root``

"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

__all__ = ["ROOTS", "RootSpec", "build_root", "root_by_name"]


@dataclass(frozen=True)
class RootSpec:
    """One fake image root.  Paths are relative to the root, in their canonical ``usr/`` form."""

    #: Short unique name, e.g. ``"debian-12"``; used as the pytest id.
    name: str
    #: Verbatim ``os-release`` contents; ``None`` when the image has no os-release at all.
    os_release: str | None
    #: ``True``: contents go to ``usr/lib/os-release`` and ``etc/os-release`` is the relative
    #: symlink ``../usr/lib/os-release``; ``False``: ``etc/os-release`` is a regular file.
    os_release_in_usr_lib: bool
    #: The dynamic loader (``""`` for a static image), e.g. ``"usr/lib64/ld-linux-x86-64.so.2"``.
    loader: str
    #: Interpreter files; the builder adds a ``python3`` symlink next to the highest version.
    pythons: tuple[str, ...]
    #: Site directories the image's python(s) read ``.pth`` files from, all present in the image.
    site_dirs: tuple[str, ...]
    #: ``distro.id()``; ``""`` without os-release.
    expected_id: str
    #: ``distro.version()``; ``""`` when none.
    expected_version: str
    #: ``distro.like()`` (``ID_LIKE``); ``""`` when none.
    expected_like: str
    #: ``"glibc"`` | ``"musl"`` | ``"none"`` (static image, no loader).
    expected_libc: str
    #: ``bin``, ``sbin``, ``lib`` and ``lib64`` are relative symlinks into ``usr/``.
    merged_usr: bool
    #: ``lib64`` (and, when merged, ``usr/lib64``) is a symlink to ``lib`` rather than a
    #: directory of its own: Arch Linux (``lib64 -> usr/lib``, ``usr/lib64 -> lib``) and the
    #: glibc busybox image (``lib64 -> lib``).
    lib64_links_to_lib: bool = False


# --- os-release files, verbatim -----------------------------------------------------------

# base-files 11.1+deb11u*: /usr/lib/os-release, /etc/os-release -> ../usr/lib/os-release.
DEBIAN_11_OS_RELEASE = """\
PRETTY_NAME="Debian GNU/Linux 11 (bullseye)"
NAME="Debian GNU/Linux"
VERSION_ID="11"
VERSION="11 (bullseye)"
VERSION_CODENAME=bullseye
ID=debian
HOME_URL="https://www.debian.org/"
SUPPORT_URL="https://www.debian.org/support"
BUG_REPORT_URL="https://bugs.debian.org/"
"""

# base-files 12.4+deb12u*.
DEBIAN_12_OS_RELEASE = """\
PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION="12 (bookworm)"
VERSION_CODENAME=bookworm
ID=debian
HOME_URL="https://www.debian.org/"
SUPPORT_URL="https://www.debian.org/support"
BUG_REPORT_URL="https://bugs.debian.org/"
"""

# Debian 13.1 (base-files of the 13.1 point release); trixie added DEBIAN_VERSION_FULL.
DEBIAN_13_OS_RELEASE = """\
PRETTY_NAME="Debian GNU/Linux 13 (trixie)"
NAME="Debian GNU/Linux"
VERSION_ID="13"
VERSION="13 (trixie)"
VERSION_CODENAME=trixie
DEBIAN_VERSION_FULL=13.1
ID=debian
HOME_URL="https://www.debian.org/"
SUPPORT_URL="https://www.debian.org/support"
BUG_REPORT_URL="https://bugs.debian.org/"
"""

# Ubuntu 22.04.5 (base-files 12ubuntu4.*); no LOGO line before 23.04.
UBUNTU_2204_OS_RELEASE = """\
PRETTY_NAME="Ubuntu 22.04.5 LTS"
NAME="Ubuntu"
VERSION_ID="22.04"
VERSION="22.04.5 LTS (Jammy Jellyfish)"
VERSION_CODENAME=jammy
ID=ubuntu
ID_LIKE=debian
HOME_URL="https://www.ubuntu.com/"
SUPPORT_URL="https://help.ubuntu.com/"
BUG_REPORT_URL="https://bugs.launchpad.net/ubuntu/"
PRIVACY_POLICY_URL="https://www.ubuntu.com/legal/terms-and-policies/privacy-policy"
UBUNTU_CODENAME=jammy
"""

# Ubuntu 24.04.3 (base-files 13ubuntu10.*).
UBUNTU_2404_OS_RELEASE = """\
PRETTY_NAME="Ubuntu 24.04.3 LTS"
NAME="Ubuntu"
VERSION_ID="24.04"
VERSION="24.04.3 LTS (Noble Numbat)"
VERSION_CODENAME=noble
ID=ubuntu
ID_LIKE=debian
HOME_URL="https://www.ubuntu.com/"
SUPPORT_URL="https://help.ubuntu.com/"
BUG_REPORT_URL="https://bugs.launchpad.net/ubuntu/"
PRIVACY_POLICY_URL="https://www.ubuntu.com/legal/terms-and-policies/privacy-policy"
UBUNTU_CODENAME=noble
LOGO=ubuntu-logo
"""

# alpine-release 3.20.3: a regular /etc/os-release (no /usr/lib copy in 3.20); unquoted
# VERSION_ID.
ALPINE_320_OS_RELEASE = """\
NAME="Alpine Linux"
ID=alpine
VERSION_ID=3.20.3
PRETTY_NAME="Alpine Linux v3.20"
HOME_URL="https://alpinelinux.org/"
BUG_REPORT_URL="https://gitlab.alpinelinux.org/alpine/aports/-/issues"
"""

# redhat-release 9.4 (registry.access.redhat.com/ubi9 9.4); note the blank line.
RHEL_94_OS_RELEASE = """\
NAME="Red Hat Enterprise Linux"
VERSION="9.4 (Plow)"
ID="rhel"
ID_LIKE="fedora"
VERSION_ID="9.4"
PLATFORM_ID="platform:el9"
PRETTY_NAME="Red Hat Enterprise Linux 9.4 (Plow)"
ANSI_COLOR="0;31"
LOGO="fedora-logo-icon"
CPE_NAME="cpe:/o:redhat:enterprise_linux:9::baseos"
HOME_URL="https://www.redhat.com/"
DOCUMENTATION_URL="https://access.redhat.com/documentation/en-us/red_hat_enterprise_linux/9"
BUG_REPORT_URL="https://issues.redhat.com/"

REDHAT_BUGZILLA_PRODUCT="Red Hat Enterprise Linux 9"
REDHAT_BUGZILLA_PRODUCT_VERSION=9.4
REDHAT_SUPPORT_PRODUCT="Red Hat Enterprise Linux"
REDHAT_SUPPORT_PRODUCT_VERSION="9.4"
"""

# rocky-release 9.4.
ROCKY_94_OS_RELEASE = """\
NAME="Rocky Linux"
VERSION="9.4 (Blue Onyx)"
ID="rocky"
ID_LIKE="rhel centos fedora"
VERSION_ID="9.4"
PLATFORM_ID="platform:el9"
PRETTY_NAME="Rocky Linux 9.4 (Blue Onyx)"
ANSI_COLOR="0;32"
LOGO="fedora-logo-icon"
CPE_NAME="cpe:/o:rocky:rocky:9::baseos"
HOME_URL="https://rockylinux.org/"
BUG_REPORT_URL="https://bugs.rockylinux.org/"
SUPPORT_END="2032-05-31"
ROCKY_SUPPORT_PRODUCT="Rocky-Linux-9"
ROCKY_SUPPORT_PRODUCT_VERSION="9.4"
REDHAT_SUPPORT_PRODUCT="Rocky Linux"
REDHAT_SUPPORT_PRODUCT_VERSION="9.4"
"""

# fedora-release-container 40 (the fedora:40 image); unquoted VERSION_ID, no ID_LIKE.
FEDORA_40_OS_RELEASE = """\
NAME="Fedora Linux"
VERSION="40 (Container Image)"
ID=fedora
VERSION_ID=40
VERSION_CODENAME=""
PLATFORM_ID="platform:f40"
PRETTY_NAME="Fedora Linux 40 (Container Image)"
ANSI_COLOR="0;38;2;60;110;180"
LOGO=fedora-logo-icon
CPE_NAME="cpe:/o:fedoraproject:fedora:40"
DEFAULT_HOSTNAME="fedora"
HOME_URL="https://fedoraproject.org/"
DOCUMENTATION_URL="https://docs.fedoraproject.org/en-US/fedora/f40/system-administrators-guide/"
SUPPORT_URL="https://ask.fedoraproject.org/"
BUG_REPORT_URL="https://bugzilla.redhat.com/"
REDHAT_BUGZILLA_PRODUCT="Fedora"
REDHAT_BUGZILLA_PRODUCT_VERSION=40
REDHAT_SUPPORT_PRODUCT="Fedora"
REDHAT_SUPPORT_PRODUCT_VERSION=40
SUPPORT_END=2025-05-13
VARIANT="Container Image"
VARIANT_ID=container
"""

# system-release 2023.5.20240805 (amazonlinux:2023).
AMAZON_2023_OS_RELEASE = """\
NAME="Amazon Linux"
VERSION="2023"
ID="amzn"
ID_LIKE="fedora"
VERSION_ID="2023"
PLATFORM_ID="platform:al2023"
PRETTY_NAME="Amazon Linux 2023.5.20240805"
ANSI_COLOR="0;33"
CPE_NAME="cpe:2.3:o:amazon:amazon_linux:2023"
HOME_URL="https://aws.amazon.com/linux/amazon-linux-2023/"
DOCUMENTATION_URL="https://docs.aws.amazon.com/linux/"
SUPPORT_URL="https://aws.amazon.com/premiumsupport/"
BUG_REPORT_URL="https://github.com/amazonlinux/amazon-linux-2023"
VENDOR_NAME="AWS"
VENDOR_URL="https://aws.amazon.com/"
SUPPORT_END="2028-03-15"
"""

# openSUSE-release 15.6 (opensuse/leap:15.6).
OPENSUSE_LEAP_156_OS_RELEASE = """\
NAME="openSUSE Leap"
VERSION="15.6"
ID="opensuse-leap"
ID_LIKE="suse opensuse"
VERSION_ID="15.6"
PRETTY_NAME="openSUSE Leap 15.6"
ANSI_COLOR="0;32"
CPE_NAME="cpe:/o:opensuse:leap:15.6"
BUG_REPORT_URL="https://bugs.opensuse.org"
HOME_URL="https://www.opensuse.org/"
DOCUMENTATION_URL="https://en.opensuse.org/Portal:Leap"
LOGO="distributor-logo-Leap"
"""

# openSUSE-release 20240811 (opensuse/tumbleweed snapshot); comment lines are part of the file.
OPENSUSE_TUMBLEWEED_OS_RELEASE = """\
NAME="openSUSE Tumbleweed"
# VERSION="20240811"
ID="opensuse-tumbleweed"
ID_LIKE="opensuse suse"
VERSION_ID="20240811"
PRETTY_NAME="openSUSE Tumbleweed"
ANSI_COLOR="0;32"
# CPE 2.3 format, boo#1217921
CPE_NAME="cpe:2.3:o:opensuse:tumbleweed:20240811:*:*:*:*:*:*:*"
#CPE 2.2 format
#CPE_NAME="cpe:/o:opensuse:tumbleweed:20240811"
BUG_REPORT_URL="https://bugzilla.opensuse.org"
SUPPORT_URL="https://bugs.opensuse.org"
HOME_URL="https://www.opensuse.org"
DOCUMENTATION_URL="https://en.opensuse.org/Portal:Tumbleweed"
LOGO="distributor-logo-Tumbleweed"
"""

# archlinux:base-20240811.0.253648.  The filesystem package ships /usr/lib/os-release without
# VERSION_ID; the image build (archlinux-docker) makes /etc/os-release a symlink to it and then
# runs ``sed -i '/BUILD_ID/a VERSION_ID=...' /etc/os-release``, which replaces the symlink with
# a regular file that has the VERSION_ID line.
ARCH_OS_RELEASE = """\
NAME="Arch Linux"
PRETTY_NAME="Arch Linux"
ID=arch
BUILD_ID=rolling
VERSION_ID=20240811.0.253648
ANSI_COLOR="38;2;23;147;209"
HOME_URL="https://archlinux.org/"
DOCUMENTATION_URL="https://wiki.archlinux.org/"
SUPPORT_URL="https://bbs.archlinux.org/"
BUG_REPORT_URL="https://gitlab.archlinux.org/groups/archlinux/-/issues"
PRIVACY_POLICY_URL="https://terms.archlinux.org/docs/privacy-policy/"
LOGO=archlinux-logo
"""

# gcr.io/distroless/base-debian12: distroless writes its own /usr/lib/os-release (rules_distroless
# ``os_release``, every value quoted) over base-files' copy; /etc/os-release stays base-files'
# relative symlink.
DISTROLESS_DEBIAN12_OS_RELEASE = """\
PRETTY_NAME="Distroless"
NAME="Debian GNU/Linux"
ID="debian"
VERSION_ID="12"
VERSION="Debian GNU/Linux 12 (bookworm)"
HOME_URL="https://github.com/GoogleContainerTools/distroless"
SUPPORT_URL="https://github.com/GoogleContainerTools/distroless/blob/master/README.md"
BUG_REPORT_URL="https://github.com/GoogleContainerTools/distroless/issues/new"
"""

# --- loaders ------------------------------------------------------------------------------

_GLIBC_LOADER_SPLIT = "lib64/ld-linux-x86-64.so.2"  # not merged: a file/link in /lib64
_GLIBC_LOADER_MERGED = "usr/lib64/ld-linux-x86-64.so.2"  # merged: /lib64 -> usr/lib64
_MUSL_LOADER = "lib/ld-musl-x86_64.so.1"

# --- the roots ----------------------------------------------------------------------------

ROOTS: tuple[RootSpec, ...] = (
    # debian:bullseye is the last Debian image without merged /usr (debuerreotype
    # --no-merged-usr up to bullseye).
    RootSpec(
        name="debian-11",
        os_release=DEBIAN_11_OS_RELEASE,
        os_release_in_usr_lib=True,
        loader=_GLIBC_LOADER_SPLIT,
        pythons=("usr/bin/python3.9",),
        site_dirs=("usr/lib/python3/dist-packages",),
        expected_id="debian",
        expected_version="11",
        expected_like="",
        expected_libc="glibc",
        merged_usr=False,
    ),
    RootSpec(
        name="debian-12",
        os_release=DEBIAN_12_OS_RELEASE,
        os_release_in_usr_lib=True,
        loader=_GLIBC_LOADER_MERGED,
        pythons=("usr/bin/python3.11",),
        site_dirs=("usr/lib/python3/dist-packages",),
        expected_id="debian",
        expected_version="12",
        expected_like="",
        expected_libc="glibc",
        merged_usr=True,
    ),
    RootSpec(
        name="debian-13",
        os_release=DEBIAN_13_OS_RELEASE,
        os_release_in_usr_lib=True,
        loader=_GLIBC_LOADER_MERGED,
        pythons=("usr/bin/python3.13",),
        site_dirs=("usr/lib/python3/dist-packages",),
        expected_id="debian",
        expected_version="13",
        expected_like="",
        expected_libc="glibc",
        merged_usr=True,
    ),
    RootSpec(
        name="ubuntu-22.04",
        os_release=UBUNTU_2204_OS_RELEASE,
        os_release_in_usr_lib=True,
        loader=_GLIBC_LOADER_MERGED,
        pythons=("usr/bin/python3.10",),
        site_dirs=("usr/lib/python3/dist-packages",),
        expected_id="ubuntu",
        expected_version="22.04",
        expected_like="debian",
        expected_libc="glibc",
        merged_usr=True,
    ),
    RootSpec(
        name="ubuntu-24.04",
        os_release=UBUNTU_2404_OS_RELEASE,
        os_release_in_usr_lib=True,
        loader=_GLIBC_LOADER_MERGED,
        pythons=("usr/bin/python3.12",),
        site_dirs=("usr/lib/python3/dist-packages",),
        expected_id="ubuntu",
        expected_version="24.04",
        expected_like="debian",
        expected_libc="glibc",
        merged_usr=True,
    ),
    RootSpec(
        name="alpine-3.20",
        os_release=ALPINE_320_OS_RELEASE,
        os_release_in_usr_lib=False,
        loader=_MUSL_LOADER,
        pythons=("usr/bin/python3.12",),
        site_dirs=("usr/lib/python3.12/site-packages",),
        expected_id="alpine",
        expected_version="3.20.3",
        expected_like="",
        expected_libc="musl",
        merged_usr=False,
    ),
    # ubi9/ubi (RHEL 9.4): dnf pulls in the platform python 3.9; purelib + platlib dirs.
    RootSpec(
        name="ubi-9",
        os_release=RHEL_94_OS_RELEASE,
        os_release_in_usr_lib=True,
        loader=_GLIBC_LOADER_MERGED,
        pythons=("usr/bin/python3.9",),
        site_dirs=("usr/lib/python3.9/site-packages", "usr/lib64/python3.9/site-packages"),
        expected_id="rhel",
        expected_version="9.4",
        expected_like="fedora",
        expected_libc="glibc",
        merged_usr=True,
    ),
    RootSpec(
        name="rocky-9",
        os_release=ROCKY_94_OS_RELEASE,
        os_release_in_usr_lib=True,
        loader=_GLIBC_LOADER_MERGED,
        pythons=("usr/bin/python3.9",),
        site_dirs=("usr/lib/python3.9/site-packages", "usr/lib64/python3.9/site-packages"),
        expected_id="rocky",
        expected_version="9.4",
        expected_like="rhel centos fedora",
        expected_libc="glibc",
        merged_usr=True,
    ),
    RootSpec(
        name="fedora-40",
        os_release=FEDORA_40_OS_RELEASE,
        os_release_in_usr_lib=True,
        loader=_GLIBC_LOADER_MERGED,
        pythons=("usr/bin/python3.12",),
        site_dirs=("usr/lib/python3.12/site-packages", "usr/lib64/python3.12/site-packages"),
        expected_id="fedora",
        expected_version="40",
        expected_like="",
        expected_libc="glibc",
        merged_usr=True,
    ),
    RootSpec(
        name="amazonlinux-2023",
        os_release=AMAZON_2023_OS_RELEASE,
        os_release_in_usr_lib=True,
        loader=_GLIBC_LOADER_MERGED,
        pythons=("usr/bin/python3.9",),
        site_dirs=("usr/lib/python3.9/site-packages", "usr/lib64/python3.9/site-packages"),
        expected_id="amzn",
        expected_version="2023",
        expected_like="fedora",
        expected_libc="glibc",
        merged_usr=True,
    ),
    # Leap 15 is not usr-merged; its system python3 is still 3.6.
    RootSpec(
        name="opensuse-leap-15.6",
        os_release=OPENSUSE_LEAP_156_OS_RELEASE,
        os_release_in_usr_lib=True,
        loader=_GLIBC_LOADER_SPLIT,
        pythons=("usr/bin/python3.6",),
        site_dirs=("usr/lib/python3.6/site-packages", "usr/lib64/python3.6/site-packages"),
        expected_id="opensuse",  # distro normalises "opensuse-leap" to "opensuse"
        expected_version="15.6",
        expected_like="suse opensuse",
        expected_libc="glibc",
        merged_usr=False,
    ),
    RootSpec(
        name="opensuse-tumbleweed",
        os_release=OPENSUSE_TUMBLEWEED_OS_RELEASE,
        os_release_in_usr_lib=True,
        loader=_GLIBC_LOADER_MERGED,
        pythons=("usr/bin/python3.11",),
        site_dirs=("usr/lib/python3.11/site-packages", "usr/lib64/python3.11/site-packages"),
        expected_id="opensuse-tumbleweed",
        expected_version="20240811",
        expected_like="opensuse suse",
        expected_libc="glibc",
        merged_usr=True,
    ),
    # Arch: /lib64 -> usr/lib and /usr/lib64 -> lib, so the loader really lives in /usr/lib.
    RootSpec(
        name="archlinux",
        os_release=ARCH_OS_RELEASE,
        os_release_in_usr_lib=False,
        loader="usr/lib/ld-linux-x86-64.so.2",
        pythons=("usr/bin/python3.12",),
        site_dirs=("usr/lib/python3.12/site-packages",),
        expected_id="arch",
        expected_version="20240811.0.253648",
        expected_like="",
        expected_libc="glibc",
        merged_usr=True,
        lib64_links_to_lib=True,
    ),
    # python:3.12-slim (bookworm): python built into /usr/local, no Debian python3 package.
    RootSpec(
        name="python-3.12-slim",
        os_release=DEBIAN_12_OS_RELEASE,
        os_release_in_usr_lib=True,
        loader=_GLIBC_LOADER_MERGED,
        pythons=("usr/local/bin/python3.12",),
        site_dirs=("usr/local/lib/python3.12/site-packages",),
        expected_id="debian",
        expected_version="12",
        expected_like="",
        expected_libc="glibc",
        merged_usr=True,
    ),
    # continuumio/miniconda3 style: Debian 12 base, conda's own python under /opt/conda.
    RootSpec(
        name="conda-debian12",
        os_release=DEBIAN_12_OS_RELEASE,
        os_release_in_usr_lib=True,
        loader=_GLIBC_LOADER_MERGED,
        pythons=("opt/conda/bin/python3.11",),
        site_dirs=("opt/conda/lib/python3.11/site-packages",),
        expected_id="debian",
        expected_version="12",
        expected_like="",
        expected_libc="glibc",
        merged_usr=True,
    ),
    # busybox:musl / busybox:uclibc: one static binary, no loader, no os-release.
    RootSpec(
        name="busybox",
        os_release=None,
        os_release_in_usr_lib=False,
        loader="",
        pythons=(),
        site_dirs=(),
        expected_id="",
        expected_version="",
        expected_like="",
        expected_libc="none",
        merged_usr=False,
    ),
    # busybox:latest is the glibc variant: dynamically linked, ships glibc's loader in /lib with
    # ``lib64 -> lib``; still no os-release.
    RootSpec(
        name="busybox-glibc",
        os_release=None,
        os_release_in_usr_lib=False,
        loader="lib/ld-linux-x86-64.so.2",
        pythons=(),
        site_dirs=(),
        expected_id="",
        expected_version="",
        expected_like="",
        expected_libc="glibc",
        merged_usr=False,
        lib64_links_to_lib=True,
    ),
    # gcr.io/distroless/base-debian12: libc6 unpacked without usrmerge (distroless merges /usr
    # only from debian13), no python.
    RootSpec(
        name="distroless-base-debian12",
        os_release=DISTROLESS_DEBIAN12_OS_RELEASE,
        os_release_in_usr_lib=True,
        loader=_GLIBC_LOADER_SPLIT,
        pythons=(),
        site_dirs=(),
        expected_id="debian",
        expected_version="12",
        expected_like="",
        expected_libc="glibc",
        merged_usr=False,
    ),
)


def root_by_name(name: str) -> RootSpec:
    """The spec called ``name`` (``KeyError`` if there is none)."""
    for spec in ROOTS:
        if spec.name == name:
            return spec
    raise KeyError(name)


# --- builder ------------------------------------------------------------------------------

_MERGED_TOP = ("bin", "sbin", "lib", "lib64")
_VERSIONED_PYTHON = re.compile(r"^python(\d+)\.(\d+)$")


def _relative(path: str) -> PurePosixPath:
    rel = PurePosixPath(path)
    if not rel.parts or rel.is_absolute() or ".." in rel.parts:
        raise ValueError(f"spec path must be relative and inside the root: {path!r}")
    return rel


def _canonical(spec: RootSpec, path: str) -> PurePosixPath:
    """Where ``path`` really lives in the built tree (never below one of our symlinks)."""
    rel = _relative(path)
    parts = rel.parts
    if spec.merged_usr and parts[0] in _MERGED_TOP:
        parts = ("usr", *parts)
    if spec.lib64_links_to_lib:
        if parts[0] == "lib64":
            parts = ("lib", *parts[1:])
        elif parts[:2] == ("usr", "lib64"):
            parts = ("usr", "lib", *parts[2:])
    return PurePosixPath(*parts)


def _symlink(dest: Path, link: str, target: str) -> None:
    path = dest / link
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, path)


def _empty_file(dest: Path, rel: PurePosixPath, mode: int) -> None:
    path = dest / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    path.chmod(mode)


def _python_sort_key(name: str) -> tuple[int, int]:
    match = _VERSIONED_PYTHON.match(name)
    return (int(match.group(1)), int(match.group(2))) if match else (-1, -1)


def _layout(spec: RootSpec, dest: Path) -> None:
    """Top-level directories and the merged-/usr / lib64 symlinks."""
    (dest / "etc").mkdir(parents=True, exist_ok=True)
    if spec.merged_usr:
        for top in _MERGED_TOP:
            if top == "lib64" and spec.lib64_links_to_lib:
                continue
            (dest / "usr" / top).mkdir(parents=True, exist_ok=True)
        if spec.lib64_links_to_lib:
            _symlink(dest, "usr/lib64", "lib")
            _symlink(dest, "lib64", "usr/lib")
        else:
            _symlink(dest, "lib64", "usr/lib64")
        for top in ("bin", "sbin", "lib"):
            _symlink(dest, top, f"usr/{top}")
    elif spec.lib64_links_to_lib:
        (dest / "lib").mkdir(parents=True, exist_ok=True)
        _symlink(dest, "lib64", "lib")


def _write_os_release(spec: RootSpec, dest: Path) -> None:
    if spec.os_release is None:
        return
    if spec.os_release_in_usr_lib:
        target = dest / "usr" / "lib" / "os-release"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(spec.os_release, encoding="utf-8")
        _symlink(dest, "etc/os-release", "../usr/lib/os-release")
    else:
        (dest / "etc" / "os-release").write_text(spec.os_release, encoding="utf-8")


def _write_pythons(spec: RootSpec, dest: Path) -> None:
    by_dir: dict[PurePosixPath, list[str]] = {}
    for python in spec.pythons:
        rel = _canonical(spec, python)
        _empty_file(dest, rel, 0o755)
        by_dir.setdefault(rel.parent, []).append(rel.name)
    for directory, names in by_dir.items():
        if "python3" in names:
            continue
        versioned = [n for n in names if _VERSIONED_PYTHON.match(n)]
        if versioned:
            _symlink(dest, str(directory / "python3"), max(versioned, key=_python_sort_key))


def build_root(spec: RootSpec, dest: Path) -> Path:
    """Create the fake root of ``spec`` under ``dest`` (created if missing) and return ``dest``.

    Writes the os-release file (``usr/lib/os-release`` plus the relative symlink
    ``etc/os-release -> ../usr/lib/os-release``, or a regular ``etc/os-release``), the loader as
    an empty file, each interpreter as an empty 0755 file with a relative ``python3`` symlink to
    the highest version in its directory, and each site directory.  With ``merged_usr``,
    ``bin``, ``sbin``, ``lib`` and ``lib64`` are relative symlinks into ``usr/`` and spec paths
    under them are written below ``usr/``.  ``dest`` should be empty or absent.
    """
    dest.mkdir(parents=True, exist_ok=True)
    _layout(spec, dest)
    _write_os_release(spec, dest)
    if spec.loader:
        _empty_file(dest, _canonical(spec, spec.loader), 0o755)
    _write_pythons(spec, dest)
    for site in spec.site_dirs:
        (dest / _canonical(spec, site)).mkdir(parents=True, exist_ok=True)
    return dest
