"""Checks of the fake image roots in ``distro_roots``: what ``distro`` makes of them, and layout."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import distro
import pytest

from tests.distro_roots import ROOTS, RootSpec, build_root, root_by_name

_IDS = [spec.name for spec in ROOTS]


def test_names_are_unique() -> None:
    assert len(set(_IDS)) == len(_IDS)
    assert root_by_name("debian-12").expected_version == "12"
    with pytest.raises(KeyError):
        root_by_name("no-such-image")


@pytest.mark.parametrize("spec", ROOTS, ids=_IDS)
def test_distro_reads_expected_values(spec: RootSpec, tmp_path: Path) -> None:
    root = build_root(spec, tmp_path / "root")
    info = distro.LinuxDistribution(
        root_dir=str(root), include_lsb=False, include_uname=False, include_oslevel=False
    )
    assert (info.id(), info.version(), info.like()) == (
        spec.expected_id,
        spec.expected_version,
        spec.expected_like,
    )


@pytest.mark.parametrize("spec", ROOTS, ids=_IDS)
def test_layout(spec: RootSpec, tmp_path: Path) -> None:
    root = build_root(spec, tmp_path / "root")
    assert root == tmp_path / "root"

    # Every symlink is relative and stays inside the root.
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            if path.is_symlink():
                assert not os.readlink(path).startswith("/"), path
                assert path.resolve().is_relative_to(root.resolve()), path

    os_release = root / "etc" / "os-release"
    if spec.os_release is None:
        assert not os_release.exists() and not os_release.is_symlink()
    else:
        assert os_release.read_text(encoding="utf-8") == spec.os_release
        assert os_release.is_symlink() == spec.os_release_in_usr_lib
        if spec.os_release_in_usr_lib:
            assert os.readlink(os_release) == "../usr/lib/os-release"

    for top in ("bin", "sbin", "lib", "lib64"):
        if spec.merged_usr:
            expected = "usr/lib" if top == "lib64" and spec.lib64_links_to_lib else f"usr/{top}"
            assert os.readlink(root / top) == expected
        elif top == "lib64" and spec.lib64_links_to_lib:
            assert os.readlink(root / top) == "lib"

    if spec.loader:
        assert (root / spec.loader).is_file()
        if spec.expected_libc == "glibc":  # x86_64 PT_INTERP
            assert (root / "lib64" / "ld-linux-x86-64.so.2").is_file()
        else:
            assert (root / "lib" / "ld-musl-x86_64.so.1").is_file()
    else:
        assert spec.expected_libc == "none"

    highest: dict[Path, str] = {}
    for python in spec.pythons:
        path = root / python
        assert path.is_file() and not path.is_symlink()
        assert stat.S_IMODE(path.stat().st_mode) == 0o755
        minor = int(path.name.rpartition(".")[2])
        if path.parent not in highest or minor > int(highest[path.parent].rpartition(".")[2]):
            highest[path.parent] = path.name
    for directory, name in highest.items():
        assert os.readlink(directory / "python3") == name

    for site in spec.site_dirs:
        assert (root / site).is_dir()
