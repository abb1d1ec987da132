"""Pool allocate+release rate and latency under 1, 10 and 100 concurrent clients.

A real `radium pool serve` (SQLite in WAL mode, the default durability: every grant committed
before the reply) and one CPU acceptor; clients are asyncio gRPC coroutines in this process,
each looping allocate(fraction) -> release for a fixed time: as fast as they can (the closed loop
measures capacity; its latency is concurrency / throughput), then 100 clients paced to --rate in
total (latency at a given load). Each client has its own connection, as each node agent does:
a lease socket (docs/lease-socket.md; "socket") and, in a second run of the level, a gRPC lease
stream (docs/lease-stream.md; "stream"). In the last two levels the 100 are the containers of
10 nodes and share their node's connection, whose calls and replies then go in batches. The
baseline, measured in the same run, is the same loop as two unary calls per cycle. Prints
cycles per second, p50/p99 of one cycle, the share of the machine's CPU time that its
hypervisor gave to other guests during the run ("steal%", from /proc/stat: it comes in bursts
of milliseconds, and a paced level's p99 rises with it), the CPU time the pool (with its
lease-socket front, docs/lease-front.md), the acceptor and the clients' process spent per
cycle (microseconds, user + system), the unary baseline's cycles/s and p99, and the ratio of
the rates.

With ``--store etcd`` (or ``both``, side by side) the pool's store is a 3-member etcd cluster on
loopback (fsync on, as etcd runs by default) and ``--replicas`` pool processes, and the failover
time is measured ``--failovers`` times: the leader is SIGKILLed, and the time to the first
successful allocation through the address list is taken; the killed replica then comes back as
a standby for the next trial.

    sudo .venv/bin/python -m benchmarks.pool [--seconds 5] [--synchronous normal|full]
        [--rate 2000] [--paced-runs 3] [--store sqlite|etcd|both] [--replicas 2]
        [--failovers 10]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

from benchmarks.machine import cpu_ticks
from integration.pool import AGENT_TOKEN, PoolCluster, Service
from radium import rpc
from radium.leaseclient.calls import LeaseCalls
from radium.leaseclient.socket import LeaseSocket
from radium.leaseclient.stream import LeaseStream
from radium.proto import pool_pb2 as pb
from radium.proto import pool_pb2_grpc as pb_grpc
from tests import etcd_server

#: Node agents (lease streams) the 100 clients share in the last two levels.
AGENTS = 10


async def clients(
    cluster: PoolCluster,
    concurrency: int,
    seconds: float,
    rate: float = 0.0,
    carriage: str = "socket",
    agents: int = 0,
) -> list[float]:
    """Latencies of allocate+release cycles; ``rate`` > 0 paces the clients to that total rate.
    ``carriage``: the clients call on lease sockets ("socket", docs/lease-socket.md) or gRPC
    lease streams ("stream"), one per client or, with ``agents``, that many shared among them
    (the containers of one node share their agent's); or each cycle is two unary calls
    ("unary")."""
    latencies: list[float] = []
    metadata = rpc.metadata(AGENT_TOKEN)
    async with rpc.aio_channel(cluster.address) as channel:
        stub = pb_grpc.PoolStub(channel)
        count = (agents or concurrency) if carriage != "unary" else 0
        streams: list[LeaseCalls] = [
            LeaseSocket(cluster.leases, AGENT_TOKEN, "pool", timeout=10)
            if carriage == "socket"
            else LeaseStream(channel, metadata, "pool", timeout=10)
            for _ in range(count)
        ]
        # Opened first, as a node agent's stays open: the run measures the calls.
        await asyncio.gather(*(s.connect() for s in streams))

        async def cycle(index: int, request: pb.AllocateRequest) -> None:
            if streams:
                leases = streams[index % len(streams)]
                await leases.release((await leases.allocate(request)).id)
                return
            lease = await stub.Allocate(request, metadata=metadata, timeout=10)
            await stub.Release(pb.LeaseRef(lease_id=lease.id), metadata=metadata, timeout=10)

        deadline = time.perf_counter() + seconds

        async def one(index: int) -> None:
            request = pb.AllocateRequest(fraction=0.0001, holder=f"bench-{index}")
            period = concurrency / rate if rate else 0.0
            next_start = time.perf_counter() + period * index / concurrency  # spread the clients
            while time.perf_counter() < deadline:
                if period:
                    await asyncio.sleep(max(0.0, next_start - time.perf_counter()))
                    next_start += period
                began = time.perf_counter()
                await cycle(index, request)
                latencies.append(time.perf_counter() - began)

        await asyncio.gather(*(one(i) for i in range(concurrency)))
        await asyncio.gather(*(s.close() for s in streams))
    return latencies


def cpu_seconds(service: Service) -> float:
    """User plus system CPU the service's process and its children (the pool's lease-socket
    front, docs/lease-front.md) have used so far."""
    assert service.process is not None
    process = psutil.Process(service.process.pid)
    total = 0.0
    for one in (process, *process.children(recursive=True)):
        with contextlib.suppress(psutil.NoSuchProcess):
            times = one.cpu_times()
            total += times.user + times.system
    return total


def level(
    cluster: PoolCluster,
    concurrency: int,
    seconds: float,
    rate: float,
    carriage: str,
    agents: int = 0,
) -> tuple[float, float, float, list[float], float]:
    """(cycles/s, p50 ms, p99 ms, [pool, acceptor, clients] CPU µs per cycle, % of the CPUs'
    time stolen) of one run."""
    pool, acceptor = cluster.leader(), cluster.acceptors["bench"]
    before = cpu_seconds(pool), cpu_seconds(acceptor), time.process_time()
    ticks = cpu_ticks()
    latencies = asyncio.run(clients(cluster, concurrency, seconds, rate, carriage, agents))
    stolen, total = (b - a for a, b in zip(ticks, cpu_ticks()))
    after = cpu_seconds(pool), cpu_seconds(acceptor), time.process_time()
    spent = [(a - b) * 1e6 / len(latencies) for a, b in zip(after, before)]
    ms = sorted(x * 1000 for x in latencies)
    p99 = ms[min(len(ms) - 1, int(0.99 * len(ms)))]
    return len(ms) / seconds, statistics.median(ms), p99, spent, 100 * stolen / max(total, 1)


def measure(cluster: PoolCluster, seconds: float, paced: float, paced_runs: int) -> list[str]:
    """Two rows per level, the lease socket's and the gRPC lease stream's, with the CPU the pool
    (leader) and the acceptor spent per cycle (they share this machine's cores with the
    clients, and each slows the others), then the unary baseline, measured once per level. The
    last two levels are the 100 clients as containers of AGENTS nodes, sharing their node
    agent's connection: its calls and replies go in batches. A paced level runs ``paced_runs``
    times, a row each: near saturation its tail differs from run to run."""
    rows = []
    for concurrency, agents, rate in (
        (1, 0, 0.0),
        (10, 0, 0.0),
        (100, 0, 0.0),
        *[(100, 0, paced)] * paced_runs,
        (100, AGENTS, 0.0),
        *[(100, AGENTS, paced)] * paced_runs,
    ):
        unary, _, unary_p99, _, _ = level(cluster, concurrency, seconds, rate, "unary")
        offered = f"{rate:g}" if rate else "max"
        for carriage in ("socket", "stream"):
            cycles, p50, p99, (pool_us, acceptor_us, clients_us), stolen = level(
                cluster, concurrency, seconds, rate, carriage, agents
            )
            rows.append(
                f"{concurrency:>7} {agents or concurrency:>7} {offered:>9} {carriage:>6}"
                f" {cycles:>9.0f} {p50:>7.2f} {p99:>7.2f} {stolen:>6.1f}"
                f" {pool_us:>7.0f} {acceptor_us:>7.0f} {clients_us:>7.0f}"
                f" {unary:>7.0f} {unary_p99:>7.2f}"
                f" {cycles / unary:>5.2f}x"
            )
    return rows


def failovers(cluster: PoolCluster, trials: int) -> list[float]:
    times = []
    for _ in range(trials):
        old = cluster.leader()
        old.kill()
        lease, took = cluster.allocate_until_granted()
        times.append(took)
        client = cluster.client()
        client.release(lease.id)
        client.close()
        old.start()
        cluster.wait_standing_by(old)
    return times


def run(store: str, args: argparse.Namespace, root: Path) -> tuple[list[str], list[float]]:
    etcd = None
    if store == "etcd":
        etcd = etcd_server.three(root, fsync=True)
        etcd.start()
    (root / store).mkdir()
    cluster = PoolCluster(
        root / store,
        lease_ttl=60,
        etcd=etcd.endpoints if etcd else None,
        replicas=args.replicas if etcd else 1,
    )
    if args.synchronous == "full":
        cluster.config.write_text(
            cluster.config.read_text().replace("[pool]\n", '[pool]\nsynchronous = "full"\n')
        )
    try:
        cluster.start_pool()
        cluster.start_acceptor("bench", devices=2)
        cluster.wait_up("bench")
        rows = measure(cluster, args.seconds, args.rate, args.paced_runs)
        return rows, failovers(cluster, args.failovers) if etcd else []
    finally:
        cluster.stop()
        if etcd:
            etcd.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=5.0, help="per concurrency level")
    parser.add_argument("--synchronous", choices=("normal", "full"), default="normal")
    parser.add_argument(
        "--rate", type=float, default=2000.0, help="paced level: cycles/s offered by 100 clients"
    )
    parser.add_argument(
        "--paced-runs", type=int, default=3, help="runs of each paced level, a row each"
    )
    parser.add_argument("--store", choices=("sqlite", "etcd", "both"), default="both")
    parser.add_argument("--replicas", type=int, default=2, help="pool processes on etcd")
    parser.add_argument("--failovers", type=int, default=10, help="leader kills on etcd")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="radium-poolbench-"))
    stores = ("sqlite", "etcd") if args.store == "both" else (args.store,)
    try:
        results = {store: run(store, args, root) for store in stores}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(
        f"pool allocate+release cycles, {args.seconds:g}s per level, clients in one asyncio"
        f" process; SQLite WAL synchronous={args.synchronous}; etcd: 3 members on loopback,"
        f" fsync on, {args.replicas} pool replicas"
    )
    header = (
        f"{'clients':>7} {'streams':>7} {'offered/s':>9} {'via':>6} {'cycles/s':>9} {'p50 ms':>7}"
        f" {'p99 ms':>7} {'steal%':>6} {'pool us':>7} {'acc. us':>7} {'cli. us':>7}"
        f" {'unary/s':>7} {'p99 ms':>7} {'ratio':>6}"
    )
    print("  " + " | ".join(f"{store:^{len(header)}}" for store in stores))
    print("  " + " | ".join(header for _ in stores))
    for row in zip(*(results[store][0] for store in stores)):
        print("  " + " | ".join(row))
    times = results.get("etcd", ([], []))[1]
    if times:
        ordered = sorted(times)
        print(
            f"failover (leader SIGKILL -> first grant), {len(times)} trials: "
            f"median {statistics.median(times):.2f}s, max {ordered[-1]:.2f}s, "
            f"all: {' '.join(f'{t:.2f}' for t in times)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
