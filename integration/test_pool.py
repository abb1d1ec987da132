"""The pool and its acceptors as real processes; acceptors in their own network namespaces."""

from __future__ import annotations

import contextlib
import datetime
import json
import random
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from integration.netns import Network
from integration.pool import (
    ACCEPTOR_TOKEN,
    AGENT_TOKEN,
    PoolCluster,
    Service,
    bridged_pool,
    wait_until,
)
from radium import certs, rpc
from radium.agent.broker import dial
from radium.configtree import TlsConfig
from radium.errors import (
    AuthError,
    CapacityError,
    InvalidRequestError,
    PermissionDeniedError,
    RadiumError,
)
from radium.poolclient import PoolClient
from radium.proto import pool_pb2 as pb
from radium.proto import pool_pb2_grpc as pb_grpc


@pytest.fixture(scope="module")
def cluster(
    network: Network, pool_store: list[str] | None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PoolCluster]:
    """The bridged pool, on each store in turn: every test here runs on SQLite and on etcd."""
    with bridged_pool(network, tmp_path_factory.mktemp("pool"), pool_store) as pool:
        yield pool


def test_acceptors_register_across_veth(cluster: PoolCluster) -> None:
    client = cluster.client()
    status = client.status()
    addresses = {a.name: a.data_address for a in status.acceptors}
    assert addresses["rdm-acc-a"].startswith("10.213.7.") and addresses["rdm-acc-b"].startswith(
        "10.213.7."
    )
    assert len(status.devices) == 4
    out = subprocess.run(
        [cluster.cli, "gpus", "--json"], env=cluster.env, capture_output=True, text=True, check=True
    )
    assert {d["acceptor"] for d in json.loads(out.stdout)} == {"rdm-acc-a", "rdm-acc-b"}


def active_count(cluster: PoolCluster) -> int:
    return cluster.client().status().active_leases


@pytest.mark.parametrize(
    ("request_", "error", "message"),
    [
        ({"gpus": 0}, InvalidRequestError, "ask for at least 1 GPU"),
        ({"gpus": 2**32 - 1}, InvalidRequestError, "at most 1024"),
        ({"gpus": 10**9}, InvalidRequestError, "at most 1024"),
        ({"fraction": 1.5}, InvalidRequestError, "fraction must be in (0, 1]"),
        ({"fraction": -0.5}, InvalidRequestError, "fraction must be in (0, 1]"),
        (
            {"gpus": 1, "selector": {"gpu-model": "H100"}},
            InvalidRequestError,
            "no device in the pool matches",
        ),
        ({"gpus": 3}, CapacityError, "no capacity for 3 whole GPUs"),
        ({"memory_mib": 10**7}, CapacityError, "no capacity for 10000000 MiB"),
    ],
)
def test_bad_requests_are_refused_without_state_change(
    cluster: PoolCluster, request_: dict[str, object], error: type[RadiumError], message: str
) -> None:
    before = active_count(cluster)
    with pytest.raises(error) as info:
        cluster.client().allocate(**request_)  # type: ignore[arg-type]
    assert message in info.value.message
    assert active_count(cluster) == before


def test_wrong_tokens_are_refused(tmp_path: Path) -> None:
    """Tokens: the zero-config default of one machine."""
    local = PoolCluster(tmp_path)
    local.start_pool()
    try:
        for token in ("", "wrong", ACCEPTOR_TOKEN):  # an acceptor's token is no agent's token
            with pytest.raises(AuthError, match="token not accepted"):
                local.client(token).allocate(gpus=1)
        # A streaming call is refused as a streaming call.
        with pytest.raises(AuthError, match="token not accepted"):
            list(local.client("wrong").add_image("localhost:5000/x:1"))
        assert "refused /radium.v1.Pool/Allocate" in local.pool.log_tail(100)
    finally:
        local.stop()


@contextlib.contextmanager
def churned(
    tmp_path: Path, cycles: int, pool_extra: str = ""
) -> Iterator[tuple[PoolCluster, PoolClient, list[str]]]:
    """A pool with one acceptor, a client, and the ids of ``cycles`` leases it granted and
    released one after another."""
    local = PoolCluster(tmp_path, pool_extra=pool_extra)
    local.start_pool()
    local.start_acceptor("churn-acc", devices=1)
    local.wait_up("churn-acc")
    client = local.client()
    try:
        ids = []
        for _ in range(cycles):
            ids.append(client.allocate(fraction=0.5).id)
            client.release(ids[-1])
        yield local, client, ids
    finally:
        client.close()
        local.stop()


def test_the_pool_keeps_as_many_ended_leases_as_configured(tmp_path: Path) -> None:
    with churned(tmp_path, 3, pool_extra="ended_kept = 2\n") as (_, client, ids):
        assert [x.id for x in client.leases(all_=True)] == ids[:0:-1]  # the newest two


def test_a_listing_of_more_ended_leases_than_a_page_holds_comes_whole(tmp_path: Path) -> None:
    """A page holds 500 ended leases at most: `radium leases --all` reads them all, page
    after page, newest first, and so after a restart, from what SQLite kept."""
    with churned(tmp_path, 1_201) as (local, client, ids):
        held = client.allocate(fraction=0.5).id
        newest_first = [held, *ids[::-1]]
        assert [x.id for x in client.leases(all_=True)] == newest_first
        assert [x.id for x in client.leases(all_=True, ended_most=5)] == newest_first[:6]
        local.pool.kill(signal.SIGKILL)
        local.start_pool()
        assert [x.id for x in client.leases(all_=True)] == newest_first


def tls_client(cluster: PoolCluster, ca: Path, cert: Path, key: Path) -> PoolClient:
    return PoolClient(cluster.address, "", timeout=5, tls=TlsConfig(str(ca), str(cert), str(key)))


def test_mtls_refuses_another_ca_and_expired_certificates(
    cluster: PoolCluster, tmp_path: Path
) -> None:
    certs.init(tmp_path)
    stranger = certs.issue(tmp_path, "agent", "stranger")
    ours = cluster.certs / certs.CA_CERT
    long_ago = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=30)
    expired = certs.issue(cluster.certs, "agent", "expired", days=1, not_before=long_ago)
    pool = f"pool at {cluster.address}"
    for client, refusal in (
        # The pool's certificate is not from the client's CA...
        (tls_client(cluster, tmp_path / certs.CA_CERT, *stranger), "TLS handshake failed"),
        # ...the client's is not from the pool's, or has expired.
        (tls_client(cluster, ours, *stranger), "refused this node's certificate"),
        (tls_client(cluster, ours, *expired), "refused this node's certificate"),
    ):
        with pytest.raises(AuthError) as refused:
            client.status()
        line = refused.value.one_line()
        assert line.startswith(f"{pool}: {refusal}") and "\n" not in line, line
        assert line.endswith("check the tls ca, cert and key in the Radium config "
                             "(radium certs issue)")  # fmt: skip
    # Without TLS, the pool does not answer either.
    with pytest.raises(RadiumError) as plain:
        PoolClient(cluster.address, AGENT_TOKEN, timeout=5).status()
    assert plain.value.hint == "is the service running, and does it want TLS ([client.tls])?"


def test_mtls_roles_call_only_their_own_service(cluster: PoolCluster) -> None:
    # An agent's certificate cannot register an acceptor...
    channel = rpc.channel(cluster.address, cluster.tls_config("agent"))
    try:
        acceptor = pb.Acceptor(name="impostor", devices=[pb.Device(id="0", memory_mib=1)])
        with pytest.raises(grpc.RpcError) as caught:
            pb_grpc.AcceptorsStub(channel).Register(
                pb.RegisterRequest(acceptor=acceptor), timeout=5
            )
    finally:
        channel.close()
    error = rpc.from_rpc_error(caught.value, "pool")
    assert isinstance(error, PermissionDeniedError)
    assert error.one_line() == (
        "/radium.v1.Acceptors/Register: an agent certificate (agent) may not call it; "
        "it needs a certificate of role acceptor"
    )
    assert "impostor" not in {a.name for a in cluster.client().status().acceptors}
    # ...and an acceptor's cannot allocate.
    with pytest.raises(PermissionDeniedError, match="an acceptor certificate"):
        cluster.client(cert="acceptors").allocate(gpus=1)
    assert "refused /radium.v1.Pool/Allocate" in cluster.pool.log_tail(100)


def test_garbage_on_the_socket_does_not_hurt(cluster: PoolCluster) -> None:
    host, port = cluster.address.rsplit(":", 1)
    rng = random.Random(7)
    payloads = [
        b"\x00" * 64,
        b"GET / HTTP/1.1\r\n\r\n",
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes(rng.randrange(256) for _ in range(4096)),
    ]
    payloads += [
        bytes(rng.randrange(256) for _ in range(rng.randrange(1, 2048))) for _ in range(20)
    ]
    for payload in payloads:
        with socket.create_connection((host, int(port)), timeout=5) as s:
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
            with contextlib.suppress(OSError):
                s.recv(1024)
    assert cluster.pool.alive()
    lease = cluster.client().allocate(fraction=0.1, holder="after-garbage")
    assert cluster.client().release(lease.id) is True


def test_holder_that_dies_loses_its_lease_after_the_ttl(cluster: PoolCluster) -> None:
    holder = subprocess.Popen(
        [
            cluster.cli.replace("/radium", "/python"),
            "-c",
            "import sys, time\n"
            "from radium import config\n"
            "from radium.poolclient import PoolClient\n"
            "c = PoolClient.of(config.load().client)\n"
            "lease = c.allocate(fraction=0.5, holder='doomed')\n"
            "print(lease.id, flush=True)\n"
            "while True:\n"
            "    c.keep_alive(lease.id); time.sleep(0.3)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=cluster.env,
    )
    assert holder.stdout is not None
    lease_id = holder.stdout.readline().strip()
    time.sleep(4)  # longer than the TTL: kept alive
    client = cluster.client()
    listed = {le.id: le.credential for le in client.leases()}
    assert lease_id in listed and listed[lease_id] == ""  # a listing shows no credential
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    wait_until(lambda: lease_id not in {le.id for le in client.leases()}, 10, "the lease to expire")
    ended = {le.id: le.state for le in client.leases(all_=True)}
    assert ended[lease_id] == "expired"


def test_dead_acceptor_is_marked_down_and_its_leases_revoked(cluster: PoolCluster) -> None:
    client = cluster.client()
    lease = client.allocate(gpus=1, selector={"acceptor": "rdm-acc-b"}, holder="on-b", ttl=60)
    slot = cluster.root / "rdm-acc-b" / "slots" / lease.id
    dial(lease.data_address, lease.id, lease.credential).close()  # its first call makes a slot
    wait_until(slot.exists, 10, "the acceptor to make the lease's slot")
    cluster.acceptors["rdm-acc-b"].kill(signal.SIGKILL)
    cluster.wait_up("rdm-acc-b", up=False, timeout=10)
    assert {le.id: le.state for le in client.leases(all_=True)}[lease.id] == "revoked"
    with pytest.raises(CapacityError, match="no matching acceptor is up"):
        client.allocate(gpus=1, selector={"acceptor": "rdm-acc-b"})
    cluster.acceptors["rdm-acc-b"].start()
    cluster.wait_up("rdm-acc-b")
    wait_until(lambda: not slot.exists(), 10, "the restarted acceptor to drop the revoked slot")


def test_pool_killed_under_load_loses_no_lease_and_never_double_allocates(
    cluster: PoolCluster,
) -> None:
    granted: dict[str, object] = {}
    lock = threading.Lock()
    stop = threading.Event()

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        client = cluster.client()
        while not stop.is_set():
            try:
                lease = client.allocate(
                    fraction=rng.choice([0.05, 0.1, 0.2]), holder=f"load-{seed}", ttl=120
                )
            except RadiumError:
                time.sleep(0.05)
                continue
            if rng.random() < 0.5:
                try:
                    client.release(lease.id)
                    continue
                except RadiumError:
                    pass  # the pool died between grant and release: the lease must survive
            with lock:
                granted[lease.id] = lease

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    time.sleep(2)
    cluster.pool.kill(signal.SIGKILL)
    time.sleep(0.5)
    cluster.pool.start()
    time.sleep(2)
    stop.set()
    for t in threads:
        t.join(timeout=30)
    client = cluster.client()
    cluster.wait_up("rdm-acc-a", "rdm-acc-b")
    for acceptor in cluster.acceptors.values():  # the pool went away; nobody refused anything
        assert "refused this node's certificate" not in acceptor.log.read_text(), acceptor.log
    active = {le.id: le for le in client.leases()}
    missing = set(granted) - set(active)
    assert granted and not missing, f"{len(missing)} granted leases lost"
    capacity = {(d.acceptor, d.device.id): d.device.memory_mib for d in client.status().devices}
    used: dict[tuple[str, str], int] = {}
    for le in active.values():
        for device in le.device_ids:
            used[(le.acceptor, device)] = used.get((le.acceptor, device), 0) + le.memory_mib
    assert all(used[key] <= capacity[key] for key in used), "a device was over-committed"
    for le in active.values():
        client.release(le.id)


def test_a_restarted_pool_leases_a_restored_acceptor_only_once_it_registers(
    cluster: PoolCluster,
) -> None:
    # The pool dies first, so its database still says acceptor b is up; then b dies too.
    cluster.pool.kill(signal.SIGKILL)
    old = cluster.acceptors["rdm-acc-b"]
    old.kill(signal.SIGKILL)
    cluster.start_pool()
    client = cluster.client()
    assert {a.name: a.up for a in client.status().acceptors}["rdm-acc-b"] is False
    with pytest.raises(CapacityError, match="no matching acceptor is up"):
        client.allocate(gpus=1, selector={"acceptor": "rdm-acc-b"})
    # b comes back listening elsewhere: a waiting request gets it at its new address.
    address = old.argv[old.argv.index("--data-address") + 1]
    moved = address.replace(":7401", ":7402")
    new = Service([moved if a == address else a for a in old.argv], old.env, old.log)
    cluster.acceptors["rdm-acc-b"] = new
    new.start()
    lease = client.allocate(gpus=1, selector={"acceptor": "rdm-acc-b"}, holder="moved", wait=30)
    assert lease.data_address == moved
    assert client.release(lease.id) is True
    cluster.wait_up("rdm-acc-a", "rdm-acc-b")  # a registers again by itself, too


def test_waiting_requests_are_served_in_order_when_capacity_frees(cluster: PoolCluster) -> None:
    client = cluster.client()
    held = [
        client.allocate(gpus=2, holder=f"fill-{name}", selector={"acceptor": name}, ttl=60)
        for name in ("rdm-acc-a", "rdm-acc-b")
    ]
    results: dict[str, object] = {}

    def wait_for(name: str, delay: float) -> None:
        time.sleep(delay)
        try:
            results[name] = cluster.client().allocate(gpus=1, holder=name, wait=10)
        except RadiumError as exc:
            results[name] = exc

    waiters = [threading.Thread(target=wait_for, args=(f"waiter-{i}", i * 0.3)) for i in range(3)]
    for t in waiters:
        t.start()
    time.sleep(1.5)
    assert results == {}  # all three are queued
    client.release(held[0].id)  # two devices free: the first two waiters, in order
    time.sleep(1)
    assert sorted(results) == ["waiter-0", "waiter-1"]
    client.release(held[1].id)
    for t in waiters:
        t.join(timeout=15)
    leases = [results[f"waiter-{i}"] for i in range(3)]
    assert all(not isinstance(le, RadiumError) for le in leases), leases
    for le in leases:
        client.release(le.id)  # type: ignore[attr-defined]
    with pytest.raises(CapacityError, match=r"within 0\.5s"):
        client.allocate(gpus=5, wait=0.5, selector={"acceptor": "rdm-acc-a"})


def test_acceptor_reports_the_usage_of_a_leases_worker(cluster: PoolCluster) -> None:
    client = cluster.client()
    lease = client.allocate(fraction=0.1, selector={"acceptor": "rdm-acc-a"}, holder="busy", ttl=60)
    slot = cluster.root / "rdm-acc-a" / "slots" / lease.id
    # Its first connection starts its worker.
    dial(lease.data_address, lease.id, lease.credential).close()
    # The acceptor writes worker.pid once its own worker started: replace it only after that.
    wait_until((slot / "worker.pid").exists, 10, "the lease's worker")
    worker = subprocess.Popen(["python3", "-c", "x = bytearray(96 << 20)\nwhile True: pass"])
    try:
        (slot / "worker.pid").write_text(str(worker.pid))

        def reported() -> bool:
            now = {le.id: le for le in client.leases()}[lease.id]
            return now.rss_bytes > 96 << 20 and now.cpu_percent > 10

        wait_until(reported, 15, "the worker's CPU and RSS in the pool")
        client.release(lease.id)
        wait_until(lambda: not slot.exists(), 15, "the slot's teardown")
        # Ending a lease kills what runs in its own cgroups, never a process that only wrote
        # its pid where the worker's was (issue 34: nothing not the lease's is killed).
        assert worker.poll() is None
    finally:
        worker.kill()
