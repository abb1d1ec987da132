"""Worker sandbox benchmark: confined vs unconfined lease workers, side by side, in one run.

    sudo .venv/bin/python -m benchmarks.sandbox [--starts 20] [--calls 3000] [--mib 200]

Both kinds run on this process's acceptor machinery (slots, data plane on loopback), one with
the sandbox (bubblewrap, own uid, seccomp, cgroups) and one without; only that differs. Worker
start is grant -> first call answered (``Slots.prepare`` to the answer of a ping on a fresh,
authenticated connection). Then, on a started worker: a small call's p50 and p99, and 1 MiB
argument and result throughput. Every figure is printed beside the unconfined baseline with
the ratio; nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from radium.acceptor.dataplane import DataPlane
from radium.acceptor.devices import CpuBackend
from radium.acceptor.limits import Cgroups
from radium.acceptor.sandbox import Sandbox
from radium.acceptor.slots import Slots
from radium.configtree import SandboxConfig
from radium.proto import pool_pb2 as pb
from radium_interposer import handshake, wire

MIB = 1 << 20


class Client:
    """One authenticated data-plane connection, speaking frames directly (no interposer)."""

    def __init__(self, address: str, lease: str, credential: str) -> None:
        host, _, port = address.rpartition(":")
        self.sock = socket.create_connection((host, int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        handshake.client(self.sock, lease, credential)
        self.reader = self.sock.makefile("rb", buffering=1 << 16)
        self.calls = 0

    def call(self, meta: dict[str, Any], buffers: list[Any] | None = None) -> wire.Frame:
        self.calls += 1
        wire.send(self.sock, wire.CALL, self.calls, meta, buffers or [])
        frame = wire.read(self.reader.readinto, wire.Limits(max_buffer=2 * MIB))
        if frame is None or frame.type != wire.RESULT:
            raise RuntimeError(f"the worker answered {frame!r}")
        return frame

    def ping(self) -> None:
        self.call({"op": "ping"})

    def close(self) -> None:
        self.reader.close()
        self.sock.close()


class Acceptor:
    """Slots and a data plane, confined or not."""

    def __init__(self, confined: bool) -> None:
        root = tempfile.mkdtemp(prefix="radium-bench-sandbox-")
        sandbox = Sandbox(SandboxConfig()) if confined else None
        limits = Cgroups() if confined else None
        self.slots = Slots(root, CpuBackend(2, 4096), sandbox=sandbox, limits=limits)
        self.plane = DataPlane("127.0.0.1:0", self.slots)
        self.plane.start()
        self.leases = 0

    def grant(self) -> tuple[str, str]:
        self.leases += 1
        lease = f"bench-{os.getpid()}-{self.leases}"
        self.slots.prepare(pb.Lease(id=lease, device_ids=["cpu0"], credential=f"{lease}-secret"))
        return lease, f"{lease}-secret"

    def close(self) -> None:
        for lease in self.slots.active():
            self.slots.teardown(lease)
        self.plane.stop()


def start_once(acceptor: Acceptor) -> float:
    started = time.perf_counter()
    lease, credential = acceptor.grant()
    client = Client(acceptor.plane.address, lease, credential)
    client.ping()
    elapsed = time.perf_counter() - started
    client.close()
    acceptor.slots.teardown(lease)
    return elapsed


def timed(action: Callable[[], Any], count: int, warmup: int = 20) -> list[float]:
    for _ in range(warmup):
        action()
    samples = []
    for _ in range(count):
        began = time.perf_counter()
        action()
        samples.append(time.perf_counter() - began)
    return samples


UPLOAD = {"op": "call", "f": {"$": "p", "p": "builtins.len"}, "a": [{"$": "b", "i": 0}]}
DOWNLOAD = {"op": "fetch", "o": {"$": "h", "id": 1}}  # a 1 MiB bytes object kept remote


def rate(client: Client, meta: dict[str, Any], buffers: list[Any], mib: int) -> float:
    """MiB/s of ``mib`` calls moving 1 MiB each."""
    began = time.perf_counter()
    for _ in range(mib):
        client.call(meta, buffers)
    return mib / (time.perf_counter() - began)


def line(name: str, ours: float, base: float, unit: str) -> None:
    print(f"  {name:<28} confined {ours:9.2f} {unit:<5} unconfined {base:9.2f} {unit:<5} "
          f"ratio {ours / base:5.2f}x   (+{ours - base:.2f} {unit})")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.sandbox")
    parser.add_argument("--starts", type=int, default=20)
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--mib", type=int, default=200)
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("run as root: the sandbox needs it", file=sys.stderr)
        return 2
    kinds = {"confined": Acceptor(True), "unconfined": Acceptor(False)}
    rounds = 10  # every measurement alternates between the two, round by round
    starts: dict[str, list[float]] = {name: [] for name in kinds}
    calls: dict[str, list[float]] = {name: [] for name in kinds}
    rates: dict[str, list[tuple[float, float]]] = {name: [] for name in kinds}
    payload = [b"\x01" * MIB]
    try:
        for _ in range(args.starts):
            for name, acceptor in kinds.items():
                starts[name].append(start_once(acceptor))
        clients = {name: Client(a.plane.address, *a.grant()) for name, a in kinds.items()}
        for client in clients.values():
            client.call({"op": "call", "f": {"$": "p", "p": "builtins.bytes"}, "a": [MIB],
                         "r": 1, "keep": True})  # fmt: skip
        for _ in range(rounds):
            for name, client in clients.items():
                calls[name] += timed(client.ping, args.calls // rounds)
                up = rate(client, UPLOAD, payload, max(1, args.mib // rounds))
                rates[name].append((up, rate(client, DOWNLOAD, [], max(1, args.mib // rounds))))
        for client in clients.values():
            client.close()
    finally:
        for acceptor in kinds.values():
            acceptor.close()
    ms = {n: statistics.median(s) * 1e3 for n, s in starts.items()}
    p50 = {n: statistics.median(s) * 1e6 for n, s in calls.items()}
    p99 = {n: sorted(s)[int(len(s) * 0.99) - 1] * 1e6 for n, s in calls.items()}
    up = {n: statistics.median(r[0] for r in rs) for n, rs in rates.items()}
    down = {n: statistics.median(r[1] for r in rs) for n, rs in rates.items()}
    print(f"worker start, grant -> first call answered (median of {args.starts})")
    line("start", ms["confined"], ms["unconfined"], "ms")
    print(f"small call on a started worker ({args.calls} calls, in {rounds} alternating rounds)")
    line("p50", p50["confined"], p50["unconfined"], "µs")
    line("p99", p99["confined"], p99["unconfined"], "µs")
    print(f"1 MiB arguments and results ({args.mib} each way; median of the rounds' rates)")
    line("argument throughput", up["confined"], up["unconfined"], "MiB/s")
    line("result throughput", down["confined"], down["unconfined"], "MiB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
