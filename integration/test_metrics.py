"""A real Prometheus scrapes a running `radium up` (pool, acceptor, agent) and an acceptor in a
network namespace (docs/metrics.md); what it stores matches what the containers saw.

Real parts: `radium up`, a second CPU acceptor in its own network namespace, dockerd with the
radium runtime leasing through up's node agent, Debian's `prometheus`. Two containers each take
a whole device (one per acceptor: there are two); each makes remote numpy calls and prints
what `proxy.stats()` says its worker served.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from integration.dockerd import Dockerd
from integration.host import need
from integration.netns import Network
from integration.pool import Service, free_port, wait_until
from integration.radium_env import RadiumEnv
from integration.test_leases import radium_dockerd, radium_run
from integration.test_up import start_up
from radium import config as config_module
from radium.poolclient import PoolClient
from tests.packaging.test_grafana_dashboard import queries as dashboard_queries

IMAGE = "radium-test/bookworm:metrics"
ACCEPTOR = "rdm-metrics"
#: Makes remote calls with buffers both ways, reports what its worker served, then holds its
#: lease (making no call) until told to stop.
PROGRAM = """
import json, os, time
import numpy as np
from radium_interposer import proxy

sent = np.frombuffer(bytes(65536), dtype=np.uint8)
for _ in range(5):
    assert len((sent + 1).tobytes()) == 65536
print(json.dumps(proxy.stats()), flush=True)
while not os.path.exists("/signal/stop"):
    time.sleep(0.2)
"""


class Prometheus:
    """Debian's prometheus on a free loopback port, scraping ``targets`` every second."""

    def __init__(self, root: Path, targets: dict[str, str]) -> None:
        self.binary = need("prometheus")
        self.root = root
        self.address = f"127.0.0.1:{free_port()}"
        jobs = "".join(
            f"  - job_name: {job}\n    static_configs:\n      - targets: ['{target}']\n"
            for job, target in targets.items()
        )
        (root / "prometheus.yml").write_text(
            f"global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n{jobs}"
        )
        self.service = Service(
            [
                self.binary,
                f"--config.file={root / 'prometheus.yml'}",
                f"--storage.tsdb.path={root / 'data'}",
                f"--web.listen-address={self.address}",
            ],
            {"PATH": os.environ["PATH"]},
            root / "prometheus.log",
        )

    def start(self) -> None:
        self.service.start()
        wait_until(self._ready, 60, f"prometheus to be ready\n{self.service.log_tail()}")

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.address}/-/ready", timeout=2) as reply:
                return bool(reply.status == 200)
        except OSError:
            return False

    def query(self, expression: str) -> list[dict[str, Any]]:
        """The instant vector of ``expression`` (through Prometheus's HTTP API)."""
        url = f"http://{self.address}/api/v1/query?" + urllib.parse.urlencode({"query": expression})
        with urllib.request.urlopen(url, timeout=5) as reply:
            answer = json.load(reply)
        assert answer["status"] == "success", answer
        result: list[dict[str, Any]] = answer["data"]["result"]
        return result

    def values(self, expression: str, by: str) -> dict[str, float]:
        return {r["metric"].get(by, ""): float(r["value"][1]) for r in self.query(expression)}

    def eventually(self, expression: str, by: str, expected: dict[str, float]) -> None:
        """Wait (scrapes are every second) until ``expression`` by label ``by`` is ``expected``."""
        wait_until(
            lambda: self.values(expression, by) == expected,
            30,
            f"{expression} == {expected} (last: {self.values(expression, by)})",
        )

    def stop(self) -> None:
        self.service.kill(signal.SIGTERM)


@pytest.fixture(scope="module")
def up(network: Network, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """`radium up` with one CPU device, its pool on the bridge (the other acceptor's host
    reaches it there); yields its state directory."""
    state = tmp_path_factory.mktemp("up")
    listen = f"{network.gateway}:{free_port()}"
    process = start_up(state, "--cpu-devices", "1", listen=listen)
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith("Radium is up"), first + (
            process.stderr.read() if process.poll() is not None else ""
        )
        yield state
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)


@pytest.fixture(scope="module")
def metered(
    radium: RadiumEnv, network: Network, up: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Prometheus, Dockerd, Path]]:
    root = tmp_path_factory.mktemp("metrics")
    up_config = up / "config.toml"
    address = network.add_host(ACCEPTOR)
    # The second acceptor: up's config, with its own worker uids (not those of up's acceptor
    # on the same machine, whose teardown kills its uids' processes).
    acceptor_config = root / "acceptor.toml"
    acceptor_config.write_text(
        up_config.read_text() + "[acceptor.sandbox]\nuid_min = 250000\nuid_max = 259999\n"
    )
    cli = str(Path(sys.executable).parent / "radium")
    acceptor_metrics = f"{address}:{free_port()}"
    acceptor = Service(
        [
            *network.exec_prefix(ACCEPTOR),
            cli,
            "acceptor",
            "serve",
            "--name",
            ACCEPTOR,
            "--backend",
            "cpu",
            "--cpu-devices",
            "1",
            "--state-dir",
            str(root / "acceptor"),
            "--data-address",
            f"{address}:7401",
            "--metrics",
            acceptor_metrics,
        ],
        {"PATH": os.environ["PATH"], "RADIUM_CONFIG": str(acceptor_config)},
        root / "acceptor.log",
    )
    settings = config_module.load(up_config)  # its metrics ports: free ones it picked
    client = settings.client
    node_config = radium.client_config(
        "metrics.toml", f'[client]\npool = "{client.pool}"\ntoken = "{client.token}"\n', up
    )
    prometheus = Prometheus(
        root,
        {
            "pool": settings.pool.metrics,
            "acceptor": settings.acceptor.metrics,
            "agent": settings.agent.metrics,
            "netns_acceptor": acceptor_metrics,
        },
    )
    try:
        acceptor.start()
        prometheus.start()
        prometheus.eventually("up", "job", dict.fromkeys(
            ("pool", "acceptor", "agent", "netns_acceptor"), 1.0
        ))  # fmt: skip
        prometheus.eventually("radium_pool_acceptor_up", "acceptor", {"local": 1.0, ACCEPTOR: 1.0})
        with radium_dockerd(radium, node_config, IMAGE) as daemon:
            yield prometheus, daemon, root
    finally:
        prometheus.stop()
        acceptor.kill(signal.SIGTERM)


def test_prometheus_sees_leases_come_and_go_with_the_figures_containers_saw(
    metered: tuple[Prometheus, Dockerd, Path],
) -> None:
    prometheus, daemon, root = metered
    signal_dir = root / "signal"
    signal_dir.mkdir()
    mounts = ["-v", f"{signal_dir}:/signal:ro", "-e", "RADIUM_REMOTE=numpy"]
    containers = [
        radium_run(
            daemon, "RADIUM_GPUS=1", "-d", *mounts, IMAGE, "python3", "-c", PROGRAM
        ).stdout.strip()
        for _ in range(2)
    ]
    try:
        seen: dict[str, dict[str, Any]] = {}  # lease id -> what proxy.stats() said

        def reported() -> bool:
            for container in containers:
                logs = daemon.docker("logs", container).stdout.splitlines()
                if logs:
                    lease = json.loads(
                        daemon.docker("exec", container, "cat", "/run/radium/lease.json").stdout
                    )
                    seen[lease["id"]] = json.loads(logs[-1])
            return len(seen) == 2

        wait_until(reported, 120, "both containers' stats")
        # Both devices held, one per acceptor; both leases active, held by the agent.
        prometheus.eventually(
            "radium_pool_device_allocated_ratio", "acceptor", {"local": 1.0, ACCEPTOR: 1.0}
        )
        prometheus.eventually('sum(radium_pool_leases{state="active"})', "", {"": 2.0})
        prometheus.eventually("radium_agent_leases", "job", {"agent": 2.0})
        prometheus.eventually(
            'radium_agent_container_starts_total{outcome="granted"}', "job", {"agent": 2.0}
        )
        for lease, stats in seen.items():
            assert stats["calls"] >= 10 and stats["errors"] == 0, stats
            # The worker counts a call once it has answered it: the stats call itself.
            prometheus.eventually(
                f'radium_acceptor_worker_calls_total{{lease="{lease}"}}',
                "lease",
                {lease: stats["calls"] + 1},
            )
            for series, key in (("received_bytes", "bytes_in"), ("sent_bytes", "bytes_out")):
                assert stats[key] >= 65536
                prometheus.eventually(
                    f'radium_acceptor_worker_{series}_total{{lease="{lease}"}}',
                    "lease",
                    {lease: stats[key]},
                )
            rss = prometheus.values(
                f'radium_acceptor_worker_resident_memory_bytes{{lease="{lease}"}}', "lease"
            )
            assert rss[lease] > 10 << 20  # a Python with numpy
        # The pool learns the same counters from the acceptors' heartbeats (`radium top`).
        client = config_module.load(root / "acceptor.toml").client
        pool = PoolClient(client.pool, client.token, timeout=5)
        try:
            wait_until(
                lambda: (
                    {le.id: le.calls for le in pool.leases()}
                    == {lease: stats["calls"] + 1 for lease, stats in seen.items()}
                ),
                30,
                "the pool's copy of the workers' counters",
            )
        finally:
            pool.close()
    finally:
        (signal_dir / "stop").write_text("stop")
        for container in containers:
            daemon.docker("wait", container, check=False, timeout=60)
            daemon.docker("rm", "-f", container, check=False)
    # The leases ended: devices free again, per-lease series gone, the ends counted.
    prometheus.eventually(
        "radium_pool_device_allocated_ratio", "acceptor", {"local": 0.0, ACCEPTOR: 0.0}
    )
    prometheus.eventually("radium_agent_leases", "job", {"agent": 0.0})
    prometheus.eventually("count(radium_acceptor_worker_calls_total)", "", {})
    prometheus.eventually('radium_pool_leases_ended_total{state="released"}', "job", {"pool": 2.0})
    # Every query of the Grafana dashboard is valid PromQL over what Radium exports.
    for expression in dashboard_queries():
        prometheus.query(expression)
    granted = prometheus.values('radium_pool_allocations_total{outcome="granted"}', "job")
    assert granted == {"pool": 2.0}
    assert prometheus.values("radium_pool_allocation_duration_seconds_count", "job") == {
        "pool": 2.0
    }
