"""Integration fixtures: real runc, dockerd and images; root required, missing tools fail."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration import images
from integration.host import need_root
from integration.radium_env import RadiumEnv, make_env


@pytest.fixture(scope="session")
def radium(tmp_path_factory: pytest.TempPathFactory) -> RadiumEnv:
    need_root()
    return make_env(tmp_path_factory.mktemp("radium"))


class Rootfs:
    """Extracted root filesystems, one per image per session."""

    def __init__(self, where: Path) -> None:
        self._where = where
        self._cache: dict[str, Path] = {}

    def get(self, name: str) -> Path:
        if name not in self._cache:
            if name in images.SUITES:
                tar = images.debian_tar(name)
            elif name == "alpine":
                tar = images.alpine_tar()
            elif name == "busybox":
                tar = images.busybox_tar()
            else:
                raise KeyError(name)
            self._cache[name] = images.extract(tar, self._where / name)
        return self._cache[name]


@pytest.fixture(scope="session")
def rootfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rootfs]:
    where = tmp_path_factory.mktemp("rootfs")
    yield Rootfs(where)
    shutil.rmtree(where, ignore_errors=True)
