"""Smoke runs of the benchmarks that need no root and no daemon: each, at tiny sizes, exits 0
and prints its table with real figures (numbers that parse, bytes that crossed). Their figures
are no measurement and nothing here compares a time with a threshold: a benchmark that no
longer runs against the code it measures fails here, not on the day someone wants a figure.
The root and daemon ones (sandbox, container start) are in integration/test_benchmarks_smoke.py.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

from tests.ports import free_port

ROOT = Path(__file__).resolve().parent.parent
#: Where the Alibaba trace is looked for, in order (benchmarks/traces/README.md).
TRACES = (
    ROOT / "benchmarks" / "traces" / "alibaba-gpu-v2023",
    ROOT.parent / "shared" / "traces" / "alibaba-gpu-v2023",
)
NUMBER = r"-?\d+(?:\.\d+)?"


def run_benchmark(name: str, *args: str, env: dict[str, str] | None = None) -> str:
    """``python -m benchmarks.NAME ARGS``'s stdout; it must exit 0."""
    done = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{name}", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, f"benchmarks.{name} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def numbers(line: str) -> list[float]:
    return [float(n) for n in re.findall(NUMBER, line)]


def rows(output: str, first: str) -> list[list[float]]:
    """The figures of every line that starts with ``first`` (after indentation)."""
    return [numbers(line[len(line) - len(line.lstrip()) + len(first) :])
            for line in output.splitlines() if line.lstrip().startswith(first)]  # fmt: skip


def trace_dir() -> str:
    found = [str(t) for t in TRACES if (t / "openb_node_list_gpu_node.csv").is_file()]
    given = os.environ.get("RADIUM_TRACE")
    assert given or found, f"the Alibaba trace is in none of {[str(t) for t in TRACES]}"
    return given or found[0]


def six_ports() -> int:
    """A free loopback port whose next five are free too (raw, grpc, rpyc, Pyro5 and spinning
    raw echoes)."""
    while True:
        port = free_port()
        try:
            for taken in range(port + 1, port + 6):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", taken))
        except OSError:
            continue
        return port


def check_machine(out: str) -> None:
    """The machine line at the start and the end: cores, load average, steal."""
    for when in ("start", "end"):
        line = re.search(rf"machine \({when}\): .+, (\d+) cores, load ({NUMBER}) {NUMBER} "
                         rf"{NUMBER}, steal ({NUMBER}) % since start", out)  # fmt: skip
        assert line and int(line[1]) > 0 and float(line[2]) >= 0 and float(line[3]) >= 0, out


def test_dataplane_loopback() -> None:
    out = run_benchmark(
        "dataplane", "--loopback", "--smoke", "--calls", "60", "--port", str(six_ports())
    )
    check_dataplane(out)


def check_dataplane(out: str) -> None:
    """Its figures: ratios to raw (blocking and spinning), grpcio, rpyc and Pyro5, shares of
    raw throughput, the chain, the streamed call's client cost, compute; the machine."""
    peers = [p for p in ("rpyc", "Pyro5") if f"vs {p} p50: skipped: not installed" not in out]
    for peer in peers:
        assert re.search(rf"radium p50 vs {peer} p50 .* ratio\s+{NUMBER}x", out), out
    ratios = [float(r) for r in re.findall(rf"ratio\s+({NUMBER})x", out)]
    assert len(ratios) == 8 + len(peers) and all(r > 0 for r in ratios), out
    assert re.search(rf"radium p50 vs spinning raw p50 .* ratio\s+{NUMBER}x", out), out
    shares = [float(s) for s in re.findall(rf"({NUMBER})% of raw throughput", out)]
    assert len(shares) == 4 and all(s > 0 for s in shares), out
    assert "checksums equal: True" in out, out
    assert re.search(r"= \d+ round trips of latency", out), out
    cost = (rf"(streaming|no express|STREAM=0)\s+client CPU\s+({NUMBER}) µs/call .* "
            r"streamed (\d+) \(express (\d+)\), round trips (\d+) of (\d+) calls; "
            r"result right: True")  # fmt: skip
    costs = re.findall(cost, out)
    assert [c[0] for c in costs] == ["streaming", "no express", "STREAM=0"], out
    assert all(float(c[1]) > 0 for c in costs), out
    streaming, full_path, waiting = ([int(n) for n in c[2:]] for c in costs)
    assert streaming[1] > 0 and full_path[1] == 0 and full_path[0] > 0, out  # by plan, or not
    assert waiting[0] == 0 and waiting[2] == waiting[3], out  # every call waits
    waits = re.findall(rf"waiting call as (records|JSON)\s+p50\s+({NUMBER}) µs .* ({NUMBER})x raw; "
                       r"as records (\d+), round trips (\d+) of (\d+) calls", out)  # fmt: skip
    assert [w[0] for w in waits] == ["records", "JSON"], out
    records, as_json = ([float(n) for n in w[1:]] for w in waits)  # p50, x raw, counts
    assert records[2] == records[3] == records[4] > 0 and as_json[2] == 0, out  # each one waits
    assert all(w[0] > 0 and w[1] > 0 for w in (records, as_json)), out
    check_machine(out)


def check_programs(out: str, programs: tuple[str, ...]) -> None:
    """Per program: times, ratios, counts and bytes; the summary per kind and mode; the stats
    files' sums; the machine."""
    for program in programs:
        figures = rows(out, program)[0]
        assert len(figures) == 17, out  # 3 whole, 4 warm, 3 ratios, 5 counts, 2 KiB
        calls, rt_off, streamed, by_plan, rt_on, kib_in, kib_out = figures[10:]
        assert calls > 0 and rt_off > 0 and rt_on > 0 and kib_in > 0 and kib_out > 0, out
        assert 0 <= by_plan <= streamed <= calls, out
    for kind in ("torch", "numpy"):
        summary = (rf"warm remoted/local, {kind} programs \(1\): STREAM=0 median {NUMBER} "
                   rf"worst {NUMBER} \(\w+\); no express median {NUMBER} worst {NUMBER} "
                   rf"\(\w+\); streaming median {NUMBER} worst {NUMBER}")  # fmt: skip
        assert re.search(summary, out), out
    sums = dict(re.findall(r"RADIUM_STATS_FILE sums, ([^(]+) \(\d+ processes, all \d+ runs "
                           r"each\): (calls \d+, streamed \d+, express \d+, waited \d+ \(as "
                           r"records\), round trips \d+)",
                           out))  # fmt: skip
    assert set(sums) == {"STREAM=0", "no express", "streaming"}, out
    assert numbers(sums["STREAM=0"])[1] == 0 and numbers(sums["streaming"])[0] > 0, out
    assert numbers(sums["no express"])[2] == 0 and numbers(sums["streaming"])[2] > 0, out
    check_machine(out)


def test_programs_count_calls_and_bytes() -> None:
    out = run_benchmark(
        "programs", "--runs", "1", "--callbacks", "20",
        "--programs", "numpy_user_functions,torch_autograd",
    )  # fmt: skip
    assert "link: local" in out, out
    check_programs(out, ("numpy_user_functions", "torch_autograd"))
    module_and_function_mode = rows(out, "numpy_user_functions")
    assert len(module_and_function_mode) == 2 and len(module_and_function_mode[1]) == 7, out
    assert re.search(rf"one callback costs {NUMBER} us", out), out


def test_programs_over_the_delay_relay() -> None:
    out = run_benchmark(
        "programs", "--runs", "1", "--callbacks", "5", "--link", "dc",
        "--programs", "numpy_user_functions,torch_autograd",
    )  # fmt: skip
    rtt = re.search(rf"link: dc, .* >= 50 us each way .* RTT p50 ({NUMBER}) us through it, "
                    rf"({NUMBER}) us without it", out)  # fmt: skip
    assert rtt and float(rtt[1]) > 0 and float(rtt[2]) > 0, out
    check_programs(out, ("numpy_user_functions", "torch_autograd"))


def test_delay_relay_forwards_every_byte_in_order() -> None:
    """Both ways, small chunks and a large one, through the relay to an echo and back."""
    from benchmarks import delay_relay

    relay, port = delay_relay.start(("127.0.0.1", delay_relay.echo_server()), 50)
    try:
        payload = os.urandom(3 << 20)
        with socket.create_connection(("127.0.0.1", port)) as sock:
            for message in (b"a", b"bc" * 100, payload):
                sock.sendall(message)
                got = bytearray()
                while len(got) < len(message):
                    got += sock.recv(1 << 20)
                assert bytes(got) == message
    finally:
        relay.kill()
        relay.wait()


def test_mlp_step() -> None:
    out = run_benchmark("mlp_step", "--smoke")
    local = rows(out, "local")[-1]
    assert len(local) == 3 and local[0] > 0, out  # µs/step, ratio 1.00, the loss
    for mode in ("STREAM=0", "no express", "streaming"):
        (figures,) = rows(out, mode)
        us, ratio, calls, streamed, round_trips = figures[:5]
        assert us > 0 and ratio > 0 and calls > 0 and round_trips > 0 and 0 <= streamed <= calls
        assert re.search(rf"{mode} .* identical: (yes|no \({NUMBER}\))$", out, re.M), out
    assert rows(out, "STREAM=0")[0][3] == 0, out  # nothing streams when every call waits
    check_machine(out)


def test_handshakes() -> None:
    out = run_benchmark("handshakes", "--clients", "4", "--connections", "8", "--repeat", "1")
    figures = re.findall(rf"conn/s\s+({NUMBER})\s+p50 ms\s+{NUMBER}\s+p99 ms\s+{NUMBER}", out)
    assert len(figures) == 2 and all(float(f) > 0 for f in figures), out  # before, now


def test_pool_both_stores() -> None:
    out = run_benchmark(
        "pool", "--seconds", "0.1", "--paced-runs", "1", "--replicas", "2", "--failovers", "1"
    )
    sides = [line.split("|") for line in out.splitlines() if line.count("|") == 1]
    levels = [[s.split() for s in side] for side in sides if side[0].split()[0].isdigit()]
    assert len(levels) == 12, out  # 6 levels, by socket and by stream; sqlite | etcd
    for sqlite, etcd in levels:
        assert len(sqlite) == len(etcd) == 14, out
        assert float(sqlite[4]) > 0 and float(etcd[4]) > 0, out  # cycles/s
        assert all(float(f.rstrip("x")) >= 0 for f in sqlite[5:] + etcd[5:]), out
    assert re.search(rf"failover .* 1 trials: median {NUMBER}s", out), out


def test_scheduler_on_the_trace() -> None:
    out = run_benchmark(
        "scheduler", "--seeds", "1", "--lists", "default", "--policies", "fgd",
        env={"RADIUM_TRACE": trace_dir()},
    )  # fmt: skip
    (row,) = [line for line in out.splitlines() if line.startswith("| default | fgd |")]
    shares = [float(s) for s in re.findall(rf"({NUMBER}) %", row)]
    assert len(shares) == 4 and 0 < shares[0] <= 100, out


def test_sharing_on_the_trace() -> None:
    out = run_benchmark(
        "sharing", "--seeds", "1", "--teams", "2", "--pods", "200", "--nodes", "10",
        env={"RADIUM_TRACE": trace_dir()},
    )  # fmt: skip
    (busy,) = [line for line in out.splitlines() if re.match(r"\| \d+ \(10\) \| \d", line)]
    assert re.search(rf"\| ({NUMBER})x \|", busy), out
    table = [line.split("|") for line in out.splitlines() if re.match(r"\| \d+ \(10\) \|", line)]
    shares = [row for row in table if row[2].strip() in ("radium", "static") and "%" in row[3]]
    assert len(shares) == 2 and all(numbers(row[3])[0] > 0 for row in shares), out
    costs = [row for row in table if row[2].strip() in ("radium", "static") and "ms" in row[3]]
    assert len(costs) == 2 and all(int(row[-3]) > 0 for row in costs), out  # calls
