from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from radium.errors import RootfsError, UnsafePathError
from radium.hooks import safepath


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "rootfs"
    (r / "usr" / "lib").mkdir(parents=True)
    (r / "etc").mkdir()
    (r / "etc" / "hostname").write_text("inside\n")
    return r


@pytest.fixture
def root_fd(root: Path) -> Iterator[int]:
    fd = safepath.open_root(root)
    yield fd
    os.close(fd)


def host_of(fd: int) -> str:
    return os.readlink(safepath.fd_path(fd))


@pytest.mark.parametrize(
    "link",
    ["/etc", "../../../../../../etc", "/../../etc", "../../etc"],
)
def test_symlinks_never_leave_the_root(root: Path, root_fd: int, link: str) -> None:
    (root / "usr" / "lib" / "radium").symlink_to(link)
    with safepath.opened(root_fd, "/usr/lib/radium/hostname") as fd:
        assert host_of(fd) == str(root / "etc" / "hostname")
    assert safepath.read_text(root_fd, "/usr/lib/radium/hostname") == "inside\n"


def test_create_follows_links_inside_only(root: Path, root_fd: int, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "run").symlink_to(str(outside))  # absolute host path
    with safepath.opened(root_fd, "/run/radium", create="dir") as fd:
        assert host_of(fd) == str(root / str(outside).lstrip("/") / "radium")
    assert list(outside.iterdir()) == []


def test_create_file_in_linked_site_dir(root: Path, root_fd: int, tmp_path: Path) -> None:
    (root / "usr" / "lib" / "python3").symlink_to("../../../../root")
    with safepath.opened(root_fd, "usr/lib/python3/dist-packages/radium.pth", create="file") as fd:
        assert host_of(fd) == str(root / "root" / "dist-packages" / "radium.pth")


def test_symlink_loop_is_refused(root: Path, root_fd: int) -> None:
    (root / "a").symlink_to("b")
    (root / "b").symlink_to("a")
    with pytest.raises(UnsafePathError, match="too many symbolic links"):
        safepath.open_in_root(root_fd, "a/x")


def test_file_as_directory_is_refused(root: Path, root_fd: int) -> None:
    with pytest.raises(UnsafePathError, match="not a directory"):
        safepath.open_in_root(root_fd, "etc/hostname/x")


def test_missing_path_without_create(root_fd: int) -> None:
    with pytest.raises(FileNotFoundError):
        safepath.open_in_root(root_fd, "no/such/file")
    assert not safepath.exists(root_fd, "no/such/file")
    assert safepath.read_text(root_fd, "no/such") is None
    assert safepath.list_dir(root_fd, "no/such") == []


def test_read_text_ignores_non_regular_files(root: Path, root_fd: int) -> None:
    os.mkfifo(root / "fifo")
    assert safepath.read_text(root_fd, "fifo") is None
    assert safepath.read_text(root_fd, "etc") is None


def test_real_path_reports_in_container_paths(root: Path, root_fd: int) -> None:
    (root / "lib").symlink_to("usr/lib")
    assert safepath.real_path(root_fd, "/lib") == "/usr/lib"
    assert safepath.real_path(root_fd, "/") == "/"


def test_missing_rootfs_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RootfsError, match="does not exist"):
        safepath.open_root(tmp_path / "nope")
