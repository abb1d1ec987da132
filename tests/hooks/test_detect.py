from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from radium.hooks import detect, safepath
from tests.distro_roots import ROOTS, RootSpec, build_root, root_by_name


@pytest.fixture
def root_fd(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[int]:
    spec: RootSpec = request.param
    fd = safepath.open_root(build_root(spec, tmp_path / "root"))
    yield fd
    os.close(fd)


@pytest.mark.parametrize("root_fd", ROOTS, ids=[r.name for r in ROOTS], indirect=True)
def test_detects_distribution_libc_and_pythons(
    root_fd: int, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    spec = request.node.callspec.params["root_fd"]
    found = detect.detect(root_fd, tmp_path / "scratch")
    assert found.distro_id == (spec.expected_id or detect.UNKNOWN)
    assert found.distro_version == spec.expected_version
    assert " ".join(found.distro_like) == spec.expected_like
    assert found.libc == spec.expected_libc
    if spec.loader:
        assert found.arch == "x86_64"
    # Every site directory the image's pythons read is found, and nothing else.
    assert set(found.site_dirs) <= {f"/{d}" for d in spec.site_dirs}
    assert bool(found.pythons) == bool(spec.pythons)
    for python in found.pythons:
        assert python.site_dir.startswith("/")
        assert python.version in python.path


def test_debian_python_reads_dist_packages(tmp_path: Path) -> None:
    fd = safepath.open_root(build_root(root_by_name("debian-12"), tmp_path / "r"))
    try:
        pythons = detect.detect_pythons(fd)
    finally:
        os.close(fd)
    assert [(p.path, p.version, p.site_dir) for p in pythons] == [
        ("/usr/bin/python3.11", "3.11", "/usr/lib/python3/dist-packages")
    ]


def test_rhel_python_gets_one_site_dir(tmp_path: Path) -> None:
    fd = safepath.open_root(build_root(root_by_name("ubi-9"), tmp_path / "r"))
    try:
        found = detect.detect(fd, tmp_path / "scratch")
    finally:
        os.close(fd)
    assert found.site_dirs == ("/usr/lib/python3.9/site-packages",)


def test_official_python_image_uses_usr_local(tmp_path: Path) -> None:
    fd = safepath.open_root(build_root(root_by_name("python-3.12-slim"), tmp_path / "r"))
    try:
        found = detect.detect(fd, tmp_path / "scratch")
    finally:
        os.close(fd)
    assert found.site_dirs == ("/usr/local/lib/python3.12/site-packages",)


def test_os_release_symlink_to_host_is_not_followed(tmp_path: Path) -> None:
    """An image whose os-release points at a host file must not read the host's file."""
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    secret = tmp_path / "host-os-release"
    secret.write_text('ID=hostsecret\nVERSION_ID="99"\n')
    (root / "etc" / "os-release").symlink_to(secret)
    (root / "etc" / "redhat-release").symlink_to(secret)
    fd = safepath.open_root(root)
    try:
        found = detect.detect(fd, tmp_path / "scratch")
    finally:
        os.close(fd)
    assert found.distro_id == detect.UNKNOWN
    assert found.distro_version == ""


def test_etc_symlink_to_host_etc_is_resolved_inside(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "real-etc").mkdir(parents=True)
    (root / "real-etc" / "os-release").write_text('ID=inside\nVERSION_ID="1"\n')
    (root / "etc").symlink_to("/real-etc")  # absolute: must mean <rootfs>/real-etc
    fd = safepath.open_root(root)
    try:
        assert detect.detect_distribution(fd, tmp_path / "s")[:2] == ("inside", "1")
        assert not (tmp_path / "s").exists()
    finally:
        os.close(fd)
