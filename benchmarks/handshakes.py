"""Data-plane listener benchmark: a burst of authenticated connections, the listener as it is
against the one before issue 34 (a thread per handshake: ``integration/unprotected_dataplane``).

    .venv/bin/python -m benchmarks.handshakes [--clients 50] [--connections 200] [--repeat 7]

``clients`` threads of another process (the containers of a client node: one source address)
dial ``connections`` in all at once, each connect + handshake (HELLO .. WELCOME) timed; the
acceptor side hands each
to a worker that takes it at once (a thread receiving descriptors), so the figures are the
listener's own. Prints, per listener, the median over the repetitions of the burst's throughput
and of its connections' median and 99th-percentile latency. Nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from integration.unprotected_dataplane import UnprotectedDataPlane
from radium.acceptor.dataplane import DataPlane
from radium_interposer import handshake, wire

LEASE, CREDENTIAL = "l-bench", "bench-secret"


class TakingWorker:
    """The slots' side: one lease whose worker takes every connection at once."""

    def __init__(self) -> None:
        self.control, self.worker = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        threading.Thread(target=self._take, daemon=True).start()

    def _take(self) -> None:
        while True:
            data, fd = wire.recv_fd(self.worker)
            if fd is not None:
                socket.socket(fileno=fd).close()
            if not data:
                return

    def credential(self, lease_id: str, wait: float = 0.0) -> str | None:
        return CREDENTIAL if lease_id == LEASE else None

    def hand_over(self, lease_id: str, connection: socket.socket, timeout: float | None) -> None:
        wire.send_fd(self.control, b"c", connection.fileno(), timeout)


def burst(address: str, clients: int, connections: int) -> tuple[float, list[float]]:
    """The burst's wall time and each connection's connect-to-WELCOME time."""
    host, port = address.rsplit(":", 1)
    latencies: list[float] = []
    failures: list[str] = []
    start = threading.Barrier(clients + 1)

    def client(count: int) -> None:
        start.wait()
        for _ in range(count):
            began = time.perf_counter()
            try:
                with socket.create_connection((host, int(port)), timeout=30) as sock:
                    handshake.client(sock, LEASE, CREDENTIAL)
                    latencies.append(time.perf_counter() - began)
            except (OSError, wire.ProtocolError) as exc:
                failures.append(str(exc))

    per_client = [connections // clients + (n < connections % clients) for n in range(clients)]
    threads = [threading.Thread(target=client, args=(n,)) for n in per_client]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    if failures:
        raise SystemExit(f"{len(failures)} connections failed: {failures[0]}")
    return wall, latencies


def remote_bursts(address: str, args: argparse.Namespace) -> list[tuple[float, list[float]]]:
    """The bursts, dialled by another process (as containers are): the listener's process
    runs nothing else."""
    argv = [sys.executable, "-m", "benchmarks.handshakes", "--dial", address]
    argv += ["--clients", str(args.clients), "--connections", str(args.connections)]
    argv += ["--repeat", str(args.repeat)]
    done = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=600)
    return [(wall, lat) for wall, lat in json.loads(done.stdout)]


def measure(
    make: Callable[[TakingWorker], DataPlane], args: argparse.Namespace
) -> dict[str, float]:
    worker = TakingWorker()
    plane = make(worker)
    plane.start()
    try:
        runs = remote_bursts(plane.address, args)
    finally:
        plane.stop()
    ms = [sorted(lat) for _, lat in runs]
    return {
        "conn/s": statistics.median(args.connections / wall for wall, _ in runs),
        "p50 ms": statistics.median(1e3 * lat[len(lat) // 2] for lat in ms),
        "p99 ms": statistics.median(1e3 * lat[int(len(lat) * 0.99)] for lat in ms),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--connections", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--dial", help=argparse.SUPPRESS)  # the client process
    args = parser.parse_args()
    if args.dial:
        burst(args.dial, args.clients, args.clients)  # warm up
        runs = [burst(args.dial, args.clients, args.connections) for _ in range(args.repeat)]
        print(json.dumps(runs))
        return
    listeners: dict[str, Callable[[TakingWorker], DataPlane]] = {
        "before (a thread per handshake)": lambda w: UnprotectedDataPlane("127.0.0.1:0", w),
        "now (one loop, limits)": lambda w: DataPlane("127.0.0.1:0", w),
    }
    print(f"{args.connections} connections from {args.clients} threads, median of {args.repeat}")
    for name, make in listeners.items():
        figures = measure(make, args)
        print(f"{name:34}", "  ".join(f"{k} {v:8.1f}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
