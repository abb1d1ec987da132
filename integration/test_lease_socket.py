"""The lease socket (docs/lease-socket.md) against a real pool process, on each store."""

from __future__ import annotations

import asyncio
import random
import struct
from pathlib import Path
from typing import Iterator

import pytest

from integration.pool import AGENT_TOKEN, PoolCluster, serving, wait_until
from radium.errors import PermissionDeniedError, UnavailableError
from radium.leaseclient import wire
from radium.leaseclient.socket import LeaseSocket
from radium.proto import pool_pb2 as pb


@pytest.fixture(scope="module")
def pool(
    pool_store: list[str] | None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PoolCluster]:
    """A pool (tokens) on each store in turn, and one acceptor of two devices."""
    with serving(tmp_path_factory.mktemp("socket"), pool_store) as cluster:
        yield cluster


def holders(pool: PoolCluster) -> list[str]:
    client = pool.client()
    try:
        return sorted(lease.holder for lease in client.leases())
    finally:
        client.close()


def test_many_calls_on_one_socket_are_granted_stored_and_released(pool: PoolCluster) -> None:
    async def run() -> list[pb.Lease]:
        leases = LeaseSocket(pool.leases, AGENT_TOKEN, "pool", timeout=10)
        wanted = pb.AllocateRequest(fraction=0.01, holder="sock-many")
        granted = await asyncio.gather(*(leases.allocate(wanted) for _ in range(60)))
        # What the socket granted, the pool's gRPC side lists: one state, stored.
        assert holders(pool).count("sock-many") == 60
        assert all(await asyncio.gather(*(leases.release(lease.id) for lease in granted)))
        await leases.close()
        return list(granted)

    assert len({lease.id for lease in asyncio.run(run())}) == 60
    assert "sock-many" not in holders(pool)


def test_garbage_from_many_connections_leaves_the_pool_serving(pool: PoolCluster) -> None:
    noise = random.Random(14)
    hello = wire.MAGIC + wire.frame(pb.LeaseHello(version=1, token=AGENT_TOKEN))

    def blob() -> bytes:
        body = noise.randbytes(noise.randrange(0, 64))
        return noise.choice(
            [
                body,  # anything at all
                wire.MAGIC + body,  # the magic, then garbage
                hello + body,  # welcomed, then garbage
                hello + struct.pack(">I", noise.randrange(1 << 32)) + body,  # any length
            ]
        )

    async def run() -> pb.Lease:
        host, _, port = pool.leases.rpartition(":")
        for _ in range(200):
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(blob())
            writer.write_eof()
            await asyncio.wait_for(reader.read(), 10)  # the pool closes it
            writer.close()
        leases = LeaseSocket(pool.leases, AGENT_TOKEN, "pool", timeout=10)
        lease = await leases.allocate(pb.AllocateRequest(gpus=1, holder="after-noise"))
        assert await leases.release(lease.id)
        await leases.close()
        return lease

    assert asyncio.run(run()).holder == "after-noise"
    assert pool.pool.alive()
    log = pool.pool.log_tail(2000)
    assert "Traceback" not in log
    assert "lease socket:" in log


def test_tls_admits_an_agent_certificate_and_refuses_an_acceptors(tmp_path: Path) -> None:
    cluster = PoolCluster(tmp_path, tls=True)
    try:
        cluster.start_pool()
        cluster.start_acceptor("acc", devices=1)
        cluster.wait_up("acc")

        async def run() -> None:
            agent = LeaseSocket(cluster.leases, "", "pool", 5, cluster.tls_config("agent"))
            lease = await agent.allocate(pb.AllocateRequest(gpus=1))
            assert await agent.release(lease.id)
            await agent.close()
            acceptor = LeaseSocket(cluster.leases, "", "pool", 5, cluster.tls_config("acceptors"))
            with pytest.raises(PermissionDeniedError, match="an acceptor certificate"):
                await acceptor.allocate(pb.AllocateRequest(gpus=1))
            await acceptor.close()
            # Without TLS the pool's socket takes no connection, token or not.
            plain = LeaseSocket(cluster.leases, AGENT_TOKEN, "pool", 5)
            with pytest.raises(UnavailableError) as refused:
                await plain.connect()
            assert "does the pool want TLS" in refused.value.one_line()
            await plain.close()

        asyncio.run(run())
        wait_until(
            lambda: "an acceptor certificate" in cluster.pool.log_tail(50),
            5,
            "the refusal logged",
        )
    finally:
        cluster.stop()
