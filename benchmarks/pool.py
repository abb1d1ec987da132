"""Pool allocate+release rate and latency under 1, 10 and 100 concurrent clients.

A real `radium pool serve` (SQLite in WAL mode, the default durability: every grant committed
before the reply) and one CPU acceptor; clients are asyncio gRPC coroutines in this process,
each looping allocate(fraction) -> release for a fixed time: as fast as they can (the closed loop
measures capacity; its latency is concurrency / throughput), then 100 clients paced to --rate in
total (latency at a given load). Prints cycles per second and p50/p99 of one cycle (two RPCs).

    sudo .venv/bin/python -m benchmarks.pool [--seconds 5] [--synchronous normal|full]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from integration.pool import AGENT_TOKEN, PoolCluster
from radium import rpc
from radium.proto import pool_pb2 as pb
from radium.proto import pool_pb2_grpc as pb_grpc


async def clients(address: str, concurrency: int, seconds: float, rate: float = 0.0) -> list[float]:
    """Latencies of allocate+release cycles; ``rate`` > 0 paces the clients to that total rate."""
    latencies: list[float] = []
    metadata = rpc.metadata(AGENT_TOKEN)
    async with rpc.aio_channel(address) as channel:
        stub = pb_grpc.PoolStub(channel)
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
                lease = await stub.Allocate(request, metadata=metadata, timeout=10)
                await stub.Release(pb.LeaseRef(lease_id=lease.id), metadata=metadata, timeout=10)
                latencies.append(time.perf_counter() - began)

        await asyncio.gather(*(one(i) for i in range(concurrency)))
    return latencies


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=5.0, help="per concurrency level")
    parser.add_argument("--synchronous", choices=("normal", "full"), default="normal")
    parser.add_argument(
        "--rate", type=float, default=1000.0, help="paced level: cycles/s offered by 100 clients"
    )
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="radium-poolbench-"))
    cluster = PoolCluster(root, lease_ttl=60)
    if args.synchronous == "full":
        cluster.config.write_text(
            cluster.config.read_text().replace("[pool]\n", '[pool]\nsynchronous = "full"\n')
        )
    try:
        cluster.start_pool()
        cluster.start_acceptor("bench", devices=2)
        cluster.wait_up("bench")
        print(
            f"pool allocate+release cycles, SQLite WAL synchronous={args.synchronous}, "
            f"{args.seconds:g}s per level, clients in one asyncio process"
        )
        print(f"  {'clients':>7} {'offered/s':>9} {'cycles/s':>9} {'p50 ms':>7} {'p99 ms':>7}")
        for concurrency, rate in ((1, 0.0), (10, 0.0), (100, 0.0), (100, args.rate)):
            latencies = asyncio.run(clients(cluster.address, concurrency, args.seconds, rate))
            ms = sorted(x * 1000 for x in latencies)
            p99 = ms[min(len(ms) - 1, int(0.99 * len(ms)))]
            offered = f"{rate:g}" if rate else "max"
            print(
                f"  {concurrency:>7} {offered:>9} {len(ms) / args.seconds:>9.0f} "
                f"{statistics.median(ms):>7.2f} {p99:>7.2f}"
            )
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
