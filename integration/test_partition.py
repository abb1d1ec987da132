"""A network partition: a 3-member etcd cluster and two pool replicas, each on a host of its own
(a network namespace on a private bridge). The leading replica's link goes down: it must step
down and stop granting, the other must lead with every lease intact, and the cut replica must
come back as a standby when its link does (docs/store.md). Real processes, stopped by pid."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import pytest

from integration.etcd_hosts import etcd_on_hosts
from integration.netns import Network
from integration.pool import AGENT_TOKEN, PoolCluster, Service, wait_until
from tests.etcd_server import EtcdCluster

DEVICES = 4
#: What a client on the cut replica's own host sees when it asks that replica for a lease.
ASK_OWN_REPLICA = """
import sys
from radium.errors import RadiumError, UnavailableError
from radium.poolclient import PoolClient
client = PoolClient(sys.argv[1], sys.argv[2], timeout=3)
try:
    lease = client.allocate(gpus=1, holder="cut-off")
except UnavailableError as exc:
    print("UNAVAILABLE", exc.one_line())
except RadiumError as exc:
    print(type(exc).__name__, exc.one_line())
else:
    print("GRANTED", lease.id)
"""


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Network, EtcdCluster]]:
    """The bridge with five hosts: etcd members rdm-etcd0..2, replica hosts rdm-pool0..1."""
    network = Network(prefix="10.213.9", bridge="rdmbr9").open()
    try:
        for n in range(2):
            network.add_host(f"rdm-pool{n}")
        with etcd_on_hosts(network, tmp_path_factory.mktemp("etcd")) as etcd:
            yield network, etcd
    finally:
        network.close()


@pytest.fixture(scope="module")
def pool(
    hosts: tuple[Network, EtcdCluster], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PoolCluster]:
    network, etcd = hosts
    cluster = PoolCluster(
        tmp_path_factory.mktemp("partition"),
        etcd=etcd.endpoints,
        replica_hosts={
            network.hosts[name]: network.exec_prefix(name) for name in ("rdm-pool0", "rdm-pool1")
        },
        lease_ttl=30,
        heartbeat_timeout=10,
    )
    try:
        cluster.start_pool()
        cluster.start_acceptor("acc", devices=DEVICES)  # on this host, through the bridge
        cluster.wait_up("acc")
        yield cluster
    finally:
        cluster.stop()


def host_of(pool: PoolCluster, replica: Service) -> str:
    return "rdm-pool0" if replica is pool.replicas[0] else "rdm-pool1"


def ask_from_its_host(network: Network, pool: PoolCluster, replica: Service) -> str:
    """Ask ``replica`` itself for a lease, from a client on its own host (its only reachable
    peer while its link is down)."""
    index = pool.replicas.index(replica)
    address = pool.address.split(",")[index]
    done = subprocess.run(
        [*network.exec_prefix(host_of(pool, replica)), sys.executable, "-c", ASK_OWN_REPLICA,
         address, AGENT_TOKEN],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def since(start: float) -> float:
    return time.monotonic() - start


def seen_after(start: float, events: dict[str, Callable[[], bool]]) -> dict[str, float]:
    """Seconds from ``start`` until each event was first seen (polled together)."""
    seen: dict[str, float] = {}
    while len(seen) < len(events):
        for what, happened in events.items():
            if what not in seen and happened():
                seen[what] = since(start)
        assert since(start) < 30, f"waited 30s for {set(events) - set(seen)}"
        time.sleep(0.02)
    return seen


def test_a_replica_cut_off_from_etcd_steps_down_and_stops_granting(
    pool: PoolCluster, hosts: tuple[Network, EtcdCluster]
) -> None:
    network, _ = hosts
    client = pool.client()
    kept = client.allocate(gpus=1, holder="kept")
    leader = pool.leader()
    (standby,) = [r for r in pool.replicas if r is not leader]
    assert ask_from_its_host(network, pool, leader).startswith("GRANTED")  # it would catch it
    for lease in client.leases():
        if lease.holder == "cut-off":
            client.release(lease.id)

    network.set_link(host_of(pool, leader), up=False)
    try:
        cut_at = time.monotonic()
        seen = seen_after(
            cut_at,
            {
                "the cut replica to step down": lambda: (
                    "lost the pool's leadership" in leader.log_tail(50)
                ),
                "the other replica to lead": lambda: "pool listening" in standby.log_tail(50),
            },
        )
        answer = ask_from_its_host(network, pool, leader)
        print(
            f"the cut replica stepped down {seen['the cut replica to step down']:.2f}s after the"
            f" cut, the other leads {seen['the other replica to lead']:.2f}s after the cut;"
            f" asked on its own host, the cut one answers: {answer}"
        )
        assert not answer.startswith("GRANTED"), answer
        assert answer.startswith("UNAVAILABLE ") and "\n" not in answer, answer

        lease, _ = pool.allocate_until_granted()  # the other replica, through the list
        print(f"a client that was connected to the cut one: first grant {since(cut_at):.2f}s")
        active = client.leases()
        assert {kept.id, lease.id} <= {x.id for x in active}
        devices = [f"{x.acceptor}/{d}" for x in active for d in x.device_ids]
        assert len(devices) == len(set(devices)), "a device granted twice"
        client.release(lease.id)
    finally:
        network.set_link(host_of(pool, leader), up=True)
    standby_address = pool.address.split(",")[pool.replicas.index(standby)]
    wait_until(  # its link back: it follows the new leader, nothing restarted
        lambda: f"the pool replica at {standby_address} leads" in leader.log_tail(5),
        30,
        f"the mended replica to stand by:\n{leader.log_tail()}",
    )
    assert leader.alive() and standby.alive()
    assert pool.leader() is standby
    client.release(kept.id)
    client.close()
