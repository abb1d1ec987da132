"""Data-plane benchmark: remote calls vs a raw socket and grpcio, over a veth pair, one run.

    sudo .venv/bin/python -m benchmarks.dataplane [--calls 3000] [--loopback] [--smoke] [--port P]

Ports: P the data plane, P+1 the raw echo, P+2 grpcio, P+3 rpyc, P+4 Pyro5, P+5 the raw echo
whose reads spin (both its sides poll before they block, as the data plane's do).

The acceptor side (``benchmarks/dataplane_server.py``) runs in its own network namespace (or,
with ``--loopback``, in this one, over 127.0.0.1: no root needed); this process is the client,
with the interposer. ``--smoke`` shrinks every size (the suite's smoke run; its figures are no
measurement). Every figure is printed beside its baseline,
measured in the same run, and the ratio. Nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import grpc
import numpy

from benchmarks.dataplane_extra import memory, peer_call, streamed_cost, waiting_cost
from benchmarks.dataplane_server import CREDENTIAL, LEASE, SIZE, SPIN_S
from benchmarks.machine import Machine
from benchmarks.own_network import OwnNetwork
from radium_interposer import spin, wire

PORT = 7501  # the data plane's; raw echo at + 1, grpcio + 2, rpyc + 3, Pyro5 + 4, spinning + 5
MIB = 1 << 20
COMPUTE = """
import sys, time
import numpy as np
started = time.perf_counter()
a = np.random.default_rng(0).random((int(sys.argv[1]), int(sys.argv[1])))
for _ in range(12):
    a = a @ a
    a = a / np.linalg.norm(a)
checksum = float(a.sum())
print(checksum, time.perf_counter() - started)
"""


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[int(len(ordered) * 0.99) - 1]


def timed(action: Callable[[], Any], count: int, warmup: int = 50) -> list[float]:
    for _ in range(warmup):
        action()
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return samples


class Raw:
    """The floor: one request and its answer on a plain TCP socket, no protocol at all."""

    def __init__(self, host: str, port: int, spinning: bool = False) -> None:
        """``spinning``: both sides' reads poll before they block (the echo at port + 5)."""
        self.sock = socket.create_connection((host, port + (5 if spinning else 1)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.recv_into = (
            spin.SpinningSocket(self.sock, SPIN_S).readinto if spinning else self.sock.recv_into
        )

    def exchange(self, payload: bytes | memoryview, want: int) -> None:
        self.sock.sendmsg([SIZE.pack(len(payload), want), payload])
        buf = bytearray(want)
        view, got = memoryview(buf), 0
        while got < want:
            got += self.recv_into(view[got:])


def frame_size(type_: int, meta: dict[str, Any], buffers: list[bytes]) -> int:
    return sum(memoryview(c).nbytes for c in wire.encode(type_, 1, meta, buffers))


def report(name: str, ours: float, base: float, base_name: str, unit: str = "µs") -> None:
    scale = 1e6 if unit == "µs" else 1e3
    print(
        f"  {name:<34} {ours * scale:9.1f} {unit}   {base_name:<18} {base * scale:9.1f} {unit}"
        f"   ratio {ours / base:6.2f}x"
    )


def small_calls(host: str, port: int, calls: int) -> tuple[float, float]:
    """The small call's figures; its p50 and the raw ping-pong's."""
    from benchmarks import dpfuncs

    payload = b"x" * 32
    target = {"$": "p", "p": "benchmarks.dpfuncs.noop"}
    call = {"op": "call", "f": target, "r": 1 << 40, "a": [{"$": "b", "i": 0}]}
    call_bytes = frame_size(wire.CALL, call, [payload])
    result_bytes = frame_size(wire.RESULT, {"v": None}, [])
    ours = timed(lambda: dpfuncs.noop(payload), calls)
    raw = Raw(host, port)
    request = b"q" * call_bytes
    floor = timed(lambda: raw.exchange(request, result_bytes), calls)
    spinning = Raw(host, port, spinning=True)
    polled = timed(lambda: spinning.exchange(request, result_bytes), calls)
    channel = grpc.insecure_channel(f"{host}:{port + 2}")
    unary = channel.unary_unary("/bench.Echo/Call")
    grpc_samples = timed(lambda: unary(request, timeout=10), calls)
    (p50, p99), (r50, r99), (g50, g99) = map(percentiles, (ours, floor, grpc_samples))
    s50, s99 = percentiles(polled)
    print(f"small call ({call_bytes} B request, {result_bytes} B answer), {calls} calls")
    print(
        f"  (radium's client reads poll up to {spin.cap_us()} µs, as long as its answers "
        "take, before they block; its worker's too, but for a lease of under one CPU)"
    )
    report("radium p50 vs raw ping-pong p50", p50, r50, "raw p50")
    report("radium p99 vs raw ping-pong p99", p99, r99, "raw p99")
    report("radium p50 vs spinning raw p50", p50, s50, "spin raw p50")
    report("radium p99 vs spinning raw p99", p99, s99, "spin raw p99")
    report("radium p50 vs grpcio unary p50", p50, g50, "grpc p50")
    report("radium p99 vs grpcio unary p99", p99, g99, "grpc p99")
    channel.close()
    for name in ("rpyc", "Pyro5"):
        peer = peer_call(name, host, port)
        if peer is None:
            print(f"  radium p50 vs {name} p50: skipped: not installed")
            continue
        p50_peer, _ = percentiles(timed(lambda: peer(payload), calls))  # noqa: B023 - used at once
        report(f"radium p50 vs {name} p50", p50, p50_peer, f"{name} p50")
    return p50, r50


def arrays(host: str, port: int, sizes: tuple[tuple[int, int], ...]) -> None:
    raw = Raw(host, port)
    for size, reps in sizes:
        one_size(raw, size, reps)


def one_size(raw: Raw, size: int, reps: int) -> None:
    from benchmarks import dpfuncs
    from radium_interposer.proxy import fetch

    local = numpy.ones(size // 8)
    remote = dpfuncs.make(size)
    ours_in = min(timed(lambda: dpfuncs.consume(local), reps, warmup=1))
    base_in = min(timed(lambda: raw.exchange(memoryview(local).cast("B"), 8), reps, 1))
    ours_out = min(timed(lambda: fetch(remote), reps, warmup=1))
    base_out = min(timed(lambda: raw.exchange(b"", size), reps, warmup=1))
    label = f"{size // MIB} MiB" if size >= MIB else f"{size >> 10} KiB"
    print(f"array of {label} (best of {reps})")
    for direction, ours, base in (("argument", ours_in, base_in), ("result", ours_out, base_out)):
        print(
            f"  {direction:<9} radium {size / ours / MIB:8.0f} MiB/s   raw socket "
            f"{size / base / MIB:8.0f} MiB/s   {base / ours * 100:5.1f}% of raw throughput"
        )
    for direction, action in (
        ("argument", lambda: dpfuncs.consume(local)),
        ("result", lambda: fetch(remote)),
    ):
        client_extra, worker_extra = memory(action)
        print(
            f"  {direction:<9} peak extra memory: client {client_extra / MIB:7.1f} MiB, "
            f"worker {worker_extra / MIB:7.1f} MiB (array {label})"
        )


def chain(small_p50: float, length: int = 1000) -> None:
    from benchmarks import dpfuncs
    from radium_interposer.proxy import fetch, stats

    x = dpfuncs.make(8 * 1000)
    x = x + 1.0  # the first call of a site learns that it returns a remote object
    busy_before = stats()["busy_seconds"]
    started = time.perf_counter()
    for _ in range(length):
        x = x + 1.0
    value = fetch(x)
    total = time.perf_counter() - started
    busy = stats()["busy_seconds"] - busy_before
    assert float(value[0]) == length + 2.0
    sequential = length * small_p50
    print(f"chain of {length} dependent calls on a remote handle, then one fetch")
    report("pipelined chain total", total, sequential, f"{length}x round trip", "ms")
    print(f"  = {total / small_p50:.0f} round trips of latency; worker busy {busy * 1e3:.1f} ms,"
          f" overhead beyond worker time {(total - busy) / small_p50:.0f} round trips")  # fmt: skip


def remote_env(host: str, port: int) -> dict[str, str]:
    """A numpy-less client's environment: numpy remoted, dialling the acceptor directly."""
    return {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.abspath(wire.__file__))),
        "RADIUM_DP_DIRECT": f"{host}:{port}",
        "RADIUM_LEASE": LEASE,
        "RADIUM_LEASE_CREDENTIAL": CREDENTIAL,
        "RADIUM_REMOTE": "numpy",
    }


def compute(host: str, port: int, namespace: str | None, side: int) -> None:
    env = remote_env(host, port)
    remote = subprocess.run(
        ["/usr/bin/python3", "-c", "import radium_interposer.boot\n" + COMPUTE, str(side)],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    where = ["ip", "netns", "exec", namespace] if namespace else []
    local = subprocess.run(
        [*where, sys.executable, "-c", COMPUTE, str(side)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    (r_sum, r_time), (l_sum, l_time) = (map(float, p.stdout.split()) for p in (remote, local))
    print(f"compute-heavy workload (12 x {side}² matmul + norm), remoted vs run on the acceptor")
    report("remoted from a numpy-less client", r_time, l_time, "local on acceptor", "ms")
    print(f"  checksums equal: {numpy.isclose(r_sum, l_sum)}")


#: Sizes: array (bytes, best of), chain length, compute matrix side, streamed calls.
FULL = {"arrays": ((MIB, 40), (256 * MIB, 3)), "chain": 1000, "side": 700, "streamed": 10000,
        "streamed_reps": 3}  # fmt: skip
SMOKE = {"arrays": ((64 << 10, 2), (MIB, 2)), "chain": 20, "side": 60, "streamed": 200,
         "streamed_reps": 1}  # fmt: skip


#: The acceptor side's namespace: not ``rdm-*``, which integration tests' networks sweep.
NAMESPACE = "rdmbench-dp"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.dataplane")
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--loopback", action="store_true", help="no namespace: over 127.0.0.1")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (the suite's run)")
    parser.add_argument("--port", type=int, default=PORT, help="the data plane's; +1..+4 too")
    args = parser.parse_args(argv)
    sizes = SMOKE if args.smoke else FULL
    machine = Machine()
    print(machine.line("start"))
    try:
        return on_network(args, sizes)
    finally:
        print(machine.line("end"))


def on_network(args: argparse.Namespace, sizes: dict[str, Any]) -> int:
    """The run over loopback, or with the acceptor side in a namespace of its own (root)."""
    if args.loopback:
        return run("127.0.0.1", args.port, [], None, args.calls, sizes)
    if os.geteuid() != 0:
        print("run as root: the acceptor side gets its own network namespace", file=sys.stderr)
        return 2
    network = OwnNetwork(prefix="10.213.39", bridge="rdmbr39", names=(NAMESPACE,)).open()
    try:
        host = network.add_host(NAMESPACE)
        prefix = network.exec_prefix(NAMESPACE)
        return run(host, args.port, prefix, NAMESPACE, args.calls, sizes)
    finally:
        network.close()


def run(
    host: str,
    port: int,
    prefix: list[str],
    namespace: str | None,
    calls: int,
    sizes: dict[str, Any],
) -> int:
    """The acceptor side started (in ``namespace`` through ``prefix``), then every figure."""
    server = subprocess.Popen(
        [*prefix, sys.executable, "-m", "benchmarks.dataplane_server", host, str(port)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert server.stdout is not None
    try:
        if not server.stdout.readline().startswith("ready"):
            raise SystemExit("the acceptor side did not start")
        os.environ.update(
            RADIUM_DP_DIRECT=f"{host}:{port}",
            RADIUM_LEASE=LEASE,
            RADIUM_LEASE_CREDENTIAL=CREDENTIAL,
        )
        from radium_interposer.finder import install

        remoted = ("noop", "consume", "make", "rss_peak_reset", "rss_peak")
        install([f"benchmarks.dpfuncs:{name}" for name in remoted])
        where = f"network namespace {namespace} (veth)" if namespace else "this namespace"
        print(f"acceptor in {where} at {host}; numpy {numpy.__version__}")
        p50, raw_p50 = small_calls(host, port, calls)
        waiting_cost(remote_env(host, port), calls, raw_p50, sizes["streamed_reps"])
        chain(p50, sizes["chain"])
        streamed_cost(remote_env(host, port), sizes["streamed"], sizes["streamed_reps"])
        arrays(host, port, sizes["arrays"])
        compute(host, port, namespace, sizes["side"])
        print(
            "tc netem: not available on this kernel (no sch_netem); no delay was emulated "
            "(benchmarks.programs --link dc emulates one with benchmarks/delay_relay.py)"
        )
    finally:
        server.communicate("", timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
