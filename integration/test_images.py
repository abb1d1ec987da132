"""`radium images add|ls|rm` for real: a local registry, acceptors each with its own dockerd in
its own network namespace, pulling through their engine and reporting progress to the pool."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from integration import images
from integration.dockerd import Dockerd
from integration.host import need
from integration.netns import Network
from integration.pool import PoolCluster, Service, free_port, wait_until

RADIUM_CLI = str(Path(sys.executable).parent / "radium")
ACCEPTORS = ("img-acc-a", "img-acc-b")


@dataclass
class Site:
    """A pool, a registry reachable as localhost:PORT everywhere, acceptors with dockerds."""

    cluster: PoolCluster
    network: Network
    port: int
    root: Path
    dockerds: dict[str, Dockerd] = field(default_factory=dict)
    relays: list[Service] = field(default_factory=list)

    def relay(self, name: str, prefix: list[str]) -> None:
        """localhost:PORT inside ``prefix``'s namespace reaches the registry."""
        argv = [*prefix, sys.executable, "-m", "integration.forward", "127.0.0.1",
                str(self.port), self.network.gateway, str(self.port)]  # fmt: skip
        relay = Service(
            argv, {"PYTHONPATH": str(Path(__file__).parent.parent)}, self.root / f"{name}-relay.log"
        )
        relay.start()
        self.relays.append(relay)

    def add_acceptor(self, name: str) -> None:
        address = self.network.add_host(name)
        prefix = self.network.exec_prefix(name)
        self.relay(name, prefix)
        daemon = Dockerd(
            {}, {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}, prefix=self.network.net_only_prefix(name)
        )
        daemon.start()
        self.dockerds[name] = daemon
        self.cluster.start_acceptor(
            name, prefix=prefix, data_address=f"{address}:7401",
            extra=["--engine", "docker", "--engine-address", f"unix://{daemon.socket}"],
        )  # fmt: skip
        self.cluster.wait_up(name)

    def radium(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [RADIUM_CLI, *args], env=self.cluster.env, capture_output=True, text=True, timeout=600
        )

    def stop(self) -> None:
        self.cluster.stop()
        for daemon in self.dockerds.values():
            daemon.stop()
        for relay in self.relays:
            relay.kill()


@pytest.fixture(scope="module")
def site(
    network: Network, dockerd: Dockerd, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Site]:
    registry_binary = need("docker-registry", "docker-registry")
    root = tmp_path_factory.mktemp("images")
    port = free_port()
    (root / "registry.yml").write_text(
        f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {root / 'registry'}\n"
        f"http:\n  addr: {network.gateway}:{port}\nlog:\n  level: warn\n"
    )
    (root / "pool").mkdir()
    site = Site(PoolCluster(root / "pool", host=network.gateway), network, port, root)
    registry = Service(
        [registry_binary, "serve", str(root / "registry.yml")], {}, root / "registry.log"
    )
    registry.start()
    site.relays.append(registry)
    try:
        site.relay("host", [])
        site.cluster.start_pool()
        for name in ACCEPTORS:
            site.add_acceptor(name)
        yield site
    finally:
        site.stop()


@pytest.fixture(scope="module")
def pushed(site: Site, dockerd: Dockerd) -> str:
    """An image in the registry, pushed by a client dockerd of this namespace."""
    ref = f"localhost:{site.port}/radium-test/bookworm:v1"
    dockerd.import_image(images.debian_tar("bookworm"), ref)
    push = dockerd.docker("push", ref, check=False, timeout=600)
    assert push.returncode == 0, push.stderr
    return ref


def listing(site: Site) -> list[dict[str, str]]:
    done = site.radium("images", "ls", "--json")
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, str]] = json.loads(done.stdout)
    return rows


def test_add_pulls_on_every_acceptor_and_ls_shows_digests(site: Site, pushed: str) -> None:
    done = site.radium("images", "add", pushed)
    assert done.returncode == 0, done.stdout + done.stderr
    table = done.stdout.splitlines()
    final = {line.split()[0]: line.split()[1:] for line in table[table.index(next(
        line for line in table if line.startswith("ACCEPTOR"))) + 1:]}  # fmt: skip
    assert set(final) == set(ACCEPTORS)
    digests = {row[1] for row in final.values()}
    assert all(row[0] == "ready" for row in final.values())
    assert len(digests) == 1 and next(iter(digests)).startswith("sha256:")
    # Progress lines came before the table (one per state change when not a terminal).
    assert any("pulling" in line for line in table), done.stdout
    rows = [r for r in listing(site) if r["ref"] == pushed]
    assert {r["acceptor"]: (r["state"], r["digest"]) for r in rows} == {
        name: ("ready", next(iter(digests))) for name in ACCEPTORS
    }
    for name in ACCEPTORS:  # really in each acceptor's own engine
        inspect = site.dockerds[name].docker("image", "inspect", pushed, check=False)
        assert inspect.returncode == 0, inspect.stderr


def test_an_acceptor_joining_later_pulls_registered_images(site: Site, pushed: str) -> None:
    site.add_acceptor("img-acc-late")

    def ready() -> bool:
        rows = {r["acceptor"]: r for r in listing(site) if r["ref"] == pushed}
        return rows.get("img-acc-late", {}).get("state") == "ready"

    wait_until(ready, 300, "the late acceptor to pull the registered image")
    assert (
        site.dockerds["img-acc-late"].docker("image", "inspect", pushed, check=False).returncode
        == 0
    )


def test_an_unknown_image_fails_with_the_registry_reason(site: Site) -> None:
    ref = f"localhost:{site.port}/radium-test/nope:v1"
    done = site.radium("images", "add", ref)
    assert done.returncode == 1
    failed = [
        line
        for line in done.stdout.splitlines()
        if line.startswith("img-acc-") and " failed " in line
    ]
    assert len(failed) >= len(ACCEPTORS), done.stdout
    assert all("manifest unknown" in line or "not found" in line for line in failed), done.stdout


def test_rm_removes_it_everywhere(site: Site, pushed: str) -> None:
    done = site.radium("images", "rm", pushed)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not [r for r in listing(site) if r["ref"] == pushed]
    for name, daemon in site.dockerds.items():
        assert daemon.docker("image", "inspect", pushed, check=False).returncode != 0, name
    again = site.radium("images", "rm", pushed)
    assert again.returncode == 1
    assert f"image {pushed} is not registered" in again.stderr
