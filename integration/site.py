"""A small datacenter on one machine: a pool, a local registry reachable as ``localhost:PORT``
from every namespace, and acceptors that each have their own dockerd and network namespace."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from integration.dockerd import Dockerd
from integration.host import need
from integration.netns import Network
from integration.pool import PoolCluster, Service, free_port
from integration.radium_env import RadiumEnv

RADIUM_CLI = str(Path(sys.executable).parent / "radium")


@dataclass
class Site:
    """A pool, a registry reachable as localhost:PORT everywhere, acceptors with dockerds."""

    cluster: PoolCluster
    network: Network
    port: int
    root: Path
    radium_env: RadiumEnv
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

    def add_acceptor(self, name: str, config: Path | None = None) -> None:
        """Start acceptor ``name`` on a host of its own with its own dockerd (made once)."""
        prefix = self.network.exec_prefix(name)
        if name not in self.dockerds:
            self.network.add_host(name)
            self.relay(name, prefix)
            # With the radium runtime: container-mode workers get the bundle through the hook.
            daemon = Dockerd(
                {"radium": self.radium_env.runtime},
                self.radium_env.environ(),
                prefix=prefix,
            )
            daemon.start()
            self.dockerds[name] = daemon
        self.cluster.start_acceptor(
            name, prefix=prefix, data_address=f"{self.network.hosts[name]}:7401",
            extra=["--engine", "docker", "--engine-address",
                   f"unix://{self.dockerds[name].socket}"],
            config=config,
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


@contextlib.contextmanager
def open_site(
    network: Network, radium: RadiumEnv, root: Path, acceptors: Sequence[str]
) -> Iterator[Site]:
    registry_binary = need("docker-registry", "docker-registry")
    port = free_port()
    root.mkdir(parents=True, exist_ok=True)
    (root / "registry.yml").write_text(
        f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {root / 'registry'}\n"
        f"http:\n  addr: {network.gateway}:{port}\nlog:\n  level: warn\n"
    )
    (root / "pool").mkdir(parents=True)
    cluster = PoolCluster(root / "pool", host=network.gateway, tls=True)
    site = Site(cluster, network, port, root, radium)
    registry = Service(
        [registry_binary, "serve", str(root / "registry.yml")], {}, root / "registry.log"
    )
    registry.start()
    site.relays.append(registry)
    try:
        site.relay("host", [])
        site.cluster.start_pool()
        for name in acceptors:
            site.add_acceptor(name)
        yield site
    finally:
        site.stop()
