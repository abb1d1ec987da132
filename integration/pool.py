"""Real `radium pool serve` and `radium acceptor serve` processes for tests, stopped by pid."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

from integration.host import log_tail, need
from integration.netns import Network
from radium import certs
from radium.configtree import TlsConfig
from radium.errors import CapacityError, RadiumError, UnavailableError
from radium.poolclient import PoolClient
from radium.proto import pool_pb2 as pb
from tests.ports import free_port

AGENT_TOKEN = "agent-token-for-tests"
ACCEPTOR_TOKEN = "acceptor-token-for-tests"


def wait_until(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class Service:
    """One long-running radium process with its log file."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.argv, self.env, self.log = argv, env, log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start it, unless it runs: a second process of it would fail on the first's port and
        take its place here, and the first would outlive the test."""
        if self.alive():
            return
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                self.argv, stdout=log, stderr=subprocess.STDOUT, env=self.env
            )

    def kill(self, signum: int = signal.SIGKILL) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signum)
            self.process.wait(timeout=30)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        return log_tail(self.log, lines)


class PoolCluster:
    """A pool on ``host`` (an address of this namespace) and acceptors, maybe in namespaces.

    With ``tls``, the control plane runs over mutual TLS: a CA in ``root/certs`` and one
    certificate per role (``pool``, ``acceptors``, ``agent``), as ``radium certs`` makes them.
    """

    def __init__(
        self,
        root: Path,
        host: str = "127.0.0.1",
        *,
        lease_ttl: float = 3,
        heartbeat_timeout: float = 3,
        tls: bool = False,
        pool_extra: str = "",
        etcd: list[str] | None = None,
        replicas: int = 1,
        replica_hosts: dict[str, list[str]] | None = None,
    ) -> None:
        """``pool_extra``: TOML lines for the ``[pool]`` table (and tables under it).
        ``etcd``: the pool's store is this etcd cluster, and it runs ``replicas`` processes
        (``self.replicas``; ``self.pool`` is the first), reached as one comma-separated list.
        ``replica_hosts``: instead, one replica per entry, listening on that address and run
        under that command prefix (another network namespace)."""
        self.root = root
        addresses = list(replica_hosts) if replica_hosts else [host] * replicas
        prefixes = list(replica_hosts.values()) if replica_hosts else [[]] * replicas
        listens = [f"{address}:{free_port()}" for address in addresses]
        self.address = ",".join(listens)
        #: Each replica's lease socket (docs/lease-socket.md); agents of client_table use it.
        lease_listens = [f"{address}:{free_port()}" for address in addresses]
        self.leases = ",".join(lease_listens)
        #: Where the pool and each acceptor serve /metrics (free ports: never 7410's default,
        #: which a `radium up` of another test may hold).
        self.pool_metrics = f"127.0.0.1:{free_port()}"
        self.acceptor_metrics: dict[str, str] = {}
        self.config = root / "radium.toml"
        self.certs = root / "certs"
        if tls:
            certs.init(self.certs)
            for role, name in (
                ("pool", "pool"),
                ("acceptor", "acceptors"),
                ("agent", "agent"),
                ("admin", "admin"),
            ):
                certs.issue(self.certs, role, name, [host] if role == "pool" else [])
        self.tls = tls
        etcd_table = ""
        if etcd:
            endpoints = ", ".join(f'"{e}"' for e in etcd)
            etcd_table = (
                f'[pool.etcd]\nendpoints = [{endpoints}]\nprefix = "/{root.name}/"\n'
                "election_ttl = 1\ntimeout = 1\n"
            )
        pool_table = (
            f'db = "{root / "pool.db"}"\nstore = "{"etcd" if etcd else "sqlite"}"\n'
            f"lease_ttl = {lease_ttl}\nheartbeat_timeout = {heartbeat_timeout}\n"
            f'agent_tokens = ["{AGENT_TOKEN}"]\nacceptor_tokens = ["{ACCEPTOR_TOKEN}"]\n'
            + pool_extra
            + etcd_table
            + self.tls_table("pool.tls", "pool")
        )
        self.config.write_text(
            f'[pool]\nlisten = "{listens[0]}"\nmetrics = "{self.pool_metrics}"\n'
            f'lease_listen = "{lease_listens[0]}"\n'
            + pool_table
            + f'[acceptor]\npool = "{self.address}"\ntoken = "{ACCEPTOR_TOKEN}"\n'
            "heartbeat_interval = 0.5\n"
            + self.tls_table("acceptor.tls", "acceptors")
            + self.client_table()
        )
        self.env = {"PATH": os.environ["PATH"], "RADIUM_CONFIG": str(self.config)}
        self.cli = str(Path(sys.executable).parent / "radium")
        self.replicas = [
            Service([*prefixes[0], self.cli, "pool", "serve"], self.env, root / "pool.log")
        ]
        for n, listen in enumerate(listens[1:], 1):
            config = root / f"replica-{n}.toml"
            config.write_text(
                f'[pool]\nlisten = "{listen}"\nmetrics = "127.0.0.1:{free_port()}"\n'
                f'lease_listen = "{lease_listens[n]}"\n' + pool_table
            )
            env = {**self.env, "RADIUM_CONFIG": str(config)}
            self.replicas.append(
                Service([*prefixes[n], self.cli, "pool", "serve"], env, root / f"replica-{n}.log")
            )
        self.pool = self.replicas[0]
        self.acceptors: dict[str, Service] = {}

    def tls_table(self, table: str, name: str) -> str:
        """``[TABLE]`` with certificate ``name`` (nothing without TLS)."""
        if not self.tls:
            return ""
        return (
            f'[{table}]\nca = "{self.certs / certs.CA_CERT}"\n'
            f'cert = "{self.certs / name}.pem"\nkey = "{self.certs / name}.key"\n'
        )

    def client_table(self, cert: str = "agent") -> str:
        """The ``[client]`` table of a config that reaches this pool as an agent (or, with
        TLS, as the holder of certificate ``cert``: "admin" may administer queues)."""
        return (
            f'[client]\npool = "{self.address}"\nleases = "{self.leases}"\n'
            f'token = "{AGENT_TOKEN}"\n'
        ) + self.tls_table("client.tls", cert)

    def tls_config(self, name: str) -> TlsConfig | None:
        if not self.tls:
            return None
        return TlsConfig(
            str(self.certs / certs.CA_CERT),
            str(self.certs / f"{name}.pem"),
            str(self.certs / f"{name}.key"),
        )

    def client(self, token: str = AGENT_TOKEN, cert: str = "agent") -> PoolClient:
        """A client with ``token``, or with certificate ``cert`` when the cluster has TLS."""
        return PoolClient(self.address, token, timeout=5, tls=self.tls_config(cert))

    def start_pool(self) -> None:
        for replica in self.replicas:
            replica.start()
        client = self.client()

        def answers() -> bool:
            try:
                client.status()
            except RadiumError:
                return False
            return True

        try:
            wait_until(answers, 30, f"the pool at {self.address}\n{self.pool.log_tail()}")
        finally:
            client.close()

    def start_acceptor(
        self,
        name: str,
        *,
        prefix: list[str] | None = None,
        devices: int = 2,
        data_address: str = "",
        extra: list[str] | None = None,
        config: Path | None = None,
    ) -> Service:
        """Start acceptor ``name`` (with ``config`` instead of the cluster's, if given)."""
        argv = [
            *(prefix or []),
            self.cli,
            "acceptor",
            "serve",
            "--name",
            name,
            "--backend",
            "cpu",
            "--cpu-devices",
            str(devices),
            "--state-dir",
            str(self.root / name),
        ]
        self.acceptor_metrics[name] = f"127.0.0.1:{free_port()}"
        argv += ["--data-address", data_address or f"127.0.0.1:{free_port()}"]
        argv += ["--metrics", self.acceptor_metrics[name], *(extra or [])]
        env = {**self.env, "RADIUM_CONFIG": str(config)} if config else self.env
        service = Service(argv, env, self.root / f"{name}.log")
        service.start()
        self.acceptors[name] = service
        return service

    def wait_up(self, *names: str, up: bool = True, timeout: float = 30) -> None:
        client = self.client()

        def reached() -> bool:
            try:
                status = {a.name: a.up for a in client.status().acceptors}
            except RadiumError:
                return False
            return all(status.get(n) is up for n in names)

        try:
            wait_until(reached, timeout, f"acceptors {names} {'up' if up else 'down'}")
        except AssertionError as exc:  # say why: the logs of those that did not make it
            logs = [self.acceptors[n] for n in names if n in self.acceptors]
            raise AssertionError(
                "".join([str(exc), *(f"\n--- {a.log}:\n{a.log_tail(10)}" for a in logs)])
            ) from None
        finally:
            client.close()

    def leader(self) -> Service:
        """The replica (``store = "etcd"``) whose last word is that it serves."""

        def serving(replica: Service) -> bool:
            text = replica.log.read_text(errors="replace") if replica.log.exists() else ""
            since = max(text.rfind("stopped serving"), text.rfind("standing by"))  # a restart
            return replica.alive() and text.rfind("pool listening") > since

        wait_until(lambda: any(serving(r) for r in self.replicas), 30, "a leading replica")
        (serving_now,) = [r for r in self.replicas if serving(r)]
        return serving_now

    def wait_standing_by(self, replica: Service) -> None:
        wait_until(lambda: "standing by" in replica.log_tail(5), 30, f"{replica.log} standing by")

    def allocate_until_granted(self, timeout: float = 30) -> tuple[pb.Lease, float]:
        """A whole-GPU lease, asked for until the pool grants one; and how long that took."""
        client = self.client()
        started = time.monotonic()
        try:
            while True:
                try:
                    return client.allocate(gpus=1, holder="probe"), time.monotonic() - started
                except (UnavailableError, CapacityError) as exc:
                    if time.monotonic() - started > timeout:
                        raise AssertionError(f"no grant within {timeout}s: {exc}") from exc
                    time.sleep(0.02)
        finally:
            client.close()

    def stop(self) -> None:
        for service in [*self.acceptors.values(), *self.replicas]:
            service.kill(signal.SIGTERM)


@contextlib.contextmanager
def bridged_pool(
    network: Network, root: Path, etcd: list[str] | None = None
) -> Iterator[PoolCluster]:
    """A pool on the bridge and two CPU acceptors, each in its own network namespace: other
    hosts, so the control plane runs over mutual TLS."""
    need("ip", "iproute2")
    pool = PoolCluster(root, host=network.gateway, tls=True, etcd=etcd)
    try:
        pool.start_pool()
        for name in ("rdm-acc-a", "rdm-acc-b"):
            address = network.hosts.get(name) or network.add_host(name)  # a module's 2nd pool
            pool.start_acceptor(
                name, prefix=network.exec_prefix(name), data_address=f"{address}:7401"
            )
        pool.wait_up("rdm-acc-a", "rdm-acc-b")
        yield pool
    finally:
        pool.stop()


@contextlib.contextmanager
def serving(
    root: Path,
    etcd: list[str] | None = None,
    devices: int = 2,
    replicas: int = 1,
    heartbeat_timeout: float = 3,
) -> Iterator[PoolCluster]:
    """A pool (tokens, lease TTL 30 s) on SQLite or ``etcd`` (``replicas`` processes), with one
    acceptor "acc" of ``devices`` devices, up; stopped after."""
    cluster = PoolCluster(
        root, lease_ttl=30, etcd=etcd, replicas=replicas, heartbeat_timeout=heartbeat_timeout
    )
    try:
        cluster.start_pool()
        cluster.start_acceptor("acc", devices=devices)
        cluster.wait_up("acc")
        yield cluster
    finally:
        cluster.stop()
