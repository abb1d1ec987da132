"""A pool of two replicas on a real 3-member etcd cluster, each member on a host of its own
(a network namespace): failover under load, an etcd member lost, quorum lost and back
(docs/store.md). Real processes, stopped by pid."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.etcd_hosts import etcd_on_hosts
from integration.netns import Network
from integration.pool import AGENT_TOKEN, PoolCluster, Service, serving
from radium.agent.broker import dial
from radium.errors import CapacityError, RadiumError, UnavailableError
from radium.leaseclient.socket import LeaseSocket
from radium.poolclient import PoolClient
from radium.proto import pool_pb2 as pb
from radium_interposer.client import Connection
from tests.etcd_server import EtcdCluster

DEVICES = 8


@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    """Three members, each on a host of its own; the replicas reach them across the bridge."""
    network = Network(prefix="10.213.10", bridge="rdmbr10").open()
    try:
        with etcd_on_hosts(network, tmp_path_factory.mktemp("etcd")) as cluster:
            yield cluster
    finally:
        network.close()


@pytest.fixture(scope="module")
def pool(etcd: EtcdCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PoolCluster]:
    root = tmp_path_factory.mktemp("replicas")
    with serving(root, etcd.endpoints, DEVICES, replicas=2, heartbeat_timeout=10) as cluster:
        yield cluster


def devices_of(leases: list[pb.Lease]) -> list[str]:
    return [f"{x.acceptor}/{d}" for x in leases for d in x.device_ids]


def test_the_leader_is_killed_under_load(pool: PoolCluster) -> None:
    client = pool.client()
    held = [client.allocate(gpus=1, holder="held") for _ in range(3)]
    stop = threading.Event()
    grants: list[pb.Lease] = []
    failures: list[str] = []

    def churn() -> None:
        mine = pool.client()
        try:
            while not stop.is_set():
                try:
                    lease = mine.allocate(gpus=1, holder="churn")
                    grants.append(lease)
                    mine.release(lease.id)
                except (UnavailableError, CapacityError) as exc:
                    failures.append(type(exc).__name__)
                    time.sleep(0.02)
        finally:
            mine.close()

    def churn_on_the_lease_socket() -> None:
        """As a node agent leases: one lease socket, reconnected by its next call."""

        async def loop() -> None:
            leases = LeaseSocket(pool.leases, AGENT_TOKEN, "pool", timeout=5)
            while not stop.is_set():
                try:
                    lease = await leases.allocate(pb.AllocateRequest(gpus=1, holder="churn"))
                    socket_grants.append(lease)
                    await leases.release(lease.id)
                except (UnavailableError, CapacityError) as exc:
                    failures.append(type(exc).__name__)
                    await asyncio.sleep(0.02)
            await leases.close()

        asyncio.run(loop())

    socket_grants: list[pb.Lease] = []
    threads = [threading.Thread(target=churn) for _ in range(3)]
    threads.append(threading.Thread(target=churn_on_the_lease_socket))
    for thread in threads:
        thread.start()
    try:
        time.sleep(1)
        before, socket_before = len(grants), len(socket_grants)
        old = pool.leader()
        old.kill(signal.SIGKILL)
        _, failover = pool.allocate_until_granted()
        time.sleep(1)
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    print(f"failover: first grant {failover:.2f}s after the leader's SIGKILL")
    assert before > 0 and len(grants) > before, "the churn went on across the failover"
    assert 0 < socket_before < len(socket_grants), "the lease socket's too"
    new = pool.leader()
    assert new is not old
    active = client.leases()
    # Every lease granted before the kill is still there, on the same device...
    assert {x.id: list(x.device_ids) for x in held} == {
        x.id: list(x.device_ids) for x in active if x.holder == "held"
    }
    # ...and no device is held twice.
    assert len(devices_of(active)) == len(set(devices_of(active)))
    # The new leader lists every lease granted before the kill, ended or not, each once: it
    # pages through the ended ones it read from etcd beside serving.
    listed = [x.id for x in listing_all(client)]
    assert len(listed) == len(set(listed))
    assert {x.id for x in [*grants[:before], *socket_grants[:socket_before]]} <= set(listed)
    assert {a.name: a.up for a in client.status().acceptors} == {"acc": True}
    old.start()  # the killed replica comes back as a standby
    pool.wait_standing_by(old)
    for lease in [*held, *(x for x in active if x.holder == "probe")]:
        client.release(lease.id)
    client.close()


def listing_all(client: PoolClient, timeout: float = 10) -> list[pb.Lease]:
    """Every lease, ended ones too, once a new leader has read its ended ones (until then it
    says to list again)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return client.leases(all_=True)
        except UnavailableError as exc:
            if "still reading its ended leases" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def ping(connection: Connection) -> None:
    """One call to the lease's worker and its answer (the data plane works)."""
    assert connection.request({"op": "ping"}) is not None


def test_etcd_loses_a_member_then_its_quorum(pool: PoolCluster, etcd: EtcdCluster) -> None:
    client = pool.client()
    kept = client.allocate(gpus=1, holder="kept")
    running = Connection(dial(kept.data_address, kept.id, kept.credential))  # a running app's
    ping(running)
    first, second, third = etcd.members
    first.kill()
    lease, _ = pool.allocate_until_granted()  # one member down: the pool serves on
    client.release(lease.id)

    second.kill()  # no quorum
    started = time.monotonic()
    with pytest.raises(RadiumError) as caught:
        while True:  # calls in flight may still be answered; the first refusal is the test
            client.release(client.allocate(gpus=1, holder="no-quorum").id)
            assert time.monotonic() - started < 30, "allocations kept succeeding without quorum"
    refused_after = time.monotonic() - started
    line = caught.value.one_line()
    print(f"no quorum: first refusal after {refused_after:.2f}s: {line}")
    assert isinstance(caught.value, UnavailableError), line
    assert "\n" not in line
    time.sleep(2)  # the leader has stepped down; the acceptor has lost its pool
    ping(running)  # without quorum, a running lease's data plane works on...
    fresh = Connection(dial(kept.data_address, kept.id, kept.credential))
    ping(fresh)  # ...and takes new ones
    fresh.sock.close()

    for member in (first, second):
        member.start(etcd.initial_cluster, state="existing")
    etcd.wait_healthy([first, second, third])
    lease, back_after = pool.allocate_until_granted()
    print(f"quorum back: first grant {back_after:.2f}s after etcd was healthy")
    # A leader that went a TTL without renewing steps down even if etcd came back meanwhile (it
    # cannot know no other replica saw its key lapse): one refusal may still come, then it leads.
    deadline = time.monotonic() + 10
    while True:
        try:
            listed = {x.id for x in client.leases()}
            break
        except UnavailableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    assert kept.id in listed
    assert all(r.alive() for r in pool.replicas), "nothing was restarted"
    ping(running)
    running.sock.close()
    for done in (lease, kept):
        client.release(done.id)
    client.close()


def test_a_second_pool_on_the_same_etcd_prefix_waits(pool: PoolCluster, tmp_path: Path) -> None:
    """Two leaders would grant the same devices: a third replica started by mistake stands by."""
    extra = Service([pool.cli, "pool", "serve"], {**pool.replicas[1].env}, tmp_path / "extra.log")
    # Same config as replica 1 but it cannot listen there: it must not even try while it waits.
    extra.start()
    try:
        pool.wait_standing_by(extra)
        assert extra.alive()
        assert "pool listening" not in extra.log_tail(50)
    finally:
        extra.kill(signal.SIGTERM)
