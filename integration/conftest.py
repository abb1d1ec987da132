"""Integration fixtures: real runc, dockerd and images; root required, missing tools fail."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration import images
from integration.containerd import Containerd
from integration.dockerd import Dockerd
from integration.host import need, need_root
from integration.netns import Network
from integration.pool import PoolCluster, bridged_pool
from integration.radium_env import RadiumEnv, make_env
from tests.etcd_server import three


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


@pytest.fixture(scope="session")
def dockerd(radium: RadiumEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dockerd]:
    """dockerd with runtimes ``radium`` and ``radium-traced`` (config.json hashed on both sides)."""
    tools = tmp_path_factory.mktemp("trace")
    trace_dir = tools / "records"
    trace_dir.mkdir()
    script = Path(__file__).with_name("trace-config.sh")
    for name, next_runtime in (
        ("trace-before", str(radium.runtime)),
        ("trace-after", need("runc")),
    ):
        shutil.copy(script, tools / name)
        (tools / name).chmod(0o755)
        (tools / f"{name}.next").write_text(next_runtime)
    config = radium.write_config("docker.toml")
    config.write_text(
        config.read_text().replace(
            "[runtime]\n", f'[runtime]\nruntimes = ["{tools / "trace-after"}"]\n'
        )
    )
    env = {**radium.environ(config), "RADIUM_TRACE_DIR": str(trace_dir)}
    daemon = Dockerd({"radium": radium.runtime, "radium-traced": tools / "trace-before"}, env)
    daemon.trace_dir = trace_dir
    try:
        daemon.start()
        yield daemon
    finally:
        daemon.stop()


@pytest.fixture(scope="session")
def containerd(radium: RadiumEnv) -> Iterator[Containerd]:
    """A private containerd whose PATH finds containerd-shim-radium-v2 (io.containerd.radium.v2)."""
    env = radium.environ()
    env["PATH"] = f"{radium.runtime.parent}:{env['PATH']}"
    daemon = Containerd(env)
    try:
        daemon.start()
        yield daemon
    finally:
        daemon.stop()


@pytest.fixture(scope="module")
def network() -> Iterator[Network]:
    net = Network().open()
    try:
        yield net
    finally:
        net.close()


@pytest.fixture(scope="module", params=["sqlite", "etcd"])
def pool_store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[str] | None]:
    """The store of a module's pool: SQLite, then a real 3-member etcd cluster (its endpoints),
    for the modules whose tests must pass on both (docs/store.md)."""
    if request.param == "sqlite":
        yield None
        return
    root = tmp_path_factory.mktemp("etcd")
    etcd = three(root)
    try:
        etcd.start()
        yield etcd.endpoints
    finally:
        etcd.stop()


@pytest.fixture(scope="module")
def cluster(network: Network, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PoolCluster]:
    """:func:`bridged_pool` on SQLite."""
    with bridged_pool(network, tmp_path_factory.mktemp("pool")) as pool:
        yield pool
