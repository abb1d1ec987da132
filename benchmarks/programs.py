"""The corpus of real programs (tests/programs), each run locally and remoted, side by side.

    .venv/bin/python -m benchmarks.programs [--runs 5] [--programs NAME,...] [--link dc]

Locally: this Python, with torch and numpy, no remoting. Remoted: a Python without them
(``/usr/bin/python3``) whose torch/numpy run on a worker on this machine (one worker for the
whole run), twice: every call waiting for its answer (``RADIUM_STREAM=0``) and streaming (the
default: a call whose result stays remote is sent without waiting). Each program runs
``--runs`` times in one process each way. Printed per program:
- the whole process's wall time each way (the local one includes importing torch, which the
  remoted client never does);
- its own execution, everything warm on both sides, ended by a sync (the streamed calls still
  in flight finish inside it): the median of the runs after the first (programs of a few
  milliseconds still warm up over their first runs: shipped classes, first calls), and its
  ratio to local, per remoted mode;
- the last run's calls, streamed calls and round trips (requests that waited for an answer),
  counted by the client, and the bytes of its frames in and out of the worker (streaming).
Then the torch and numpy programs' median and worst warm ratio per remoted mode, and the sums of
``RADIUM_STATS_FILE`` (a fresh file per remoted process: every run in it, at its exit).
``--link dc`` puts a delay relay (benchmarks/delay_relay.py, ``--delay-us`` each way) between the
client and the worker: an emulated datacenter link; the link and its measured RTT are printed.
Then function mode for the programs that have functions: the same, with a split file that also
names the program's own functions (they then run whole on the worker: fewer round trips).
Then the cost of a callback (the worker calling a local lambda): ``np.vectorize`` over
``--callbacks`` elements with a lambda (called back once per element), against the same with a
top-level function (shipped: no callbacks) and against running it all locally.
The machine (CPU, cores, load, steal) is printed at the start and the end.
Nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import remoted
from benchmarks.delay_relay import RelayedHarness
from benchmarks.machine import Machine
from benchmarks.remoted import timed
from tests.interposer.harness import BARE_PYTHON, WorkerHarness
from tests.programs.test_corpus import (
    PROGRAMS,
    WITH_FUNCTIONS,
    functions_of,
    name_of,
    remote_for,
)

#: Runs the program as __main__ (what shipping needs) with its frameworks imported before the
#: clock starts, so only the program's own work is timed; remoted, with the worker's counters
#: and the client's (calls, streamed, round trips) over the last run.
RUNNER = """
import json, os, runpy, sys, time
remote = sys.argv[2] == "remote"
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[1])))  # as `python FILE` does
crossed = {"bytes_in": 0, "bytes_out": 0}  # whole frames, as this client sends and reads them
if remote:
    import radium_interposer.boot
    from radium_interposer import wire
    from radium_interposer.client import state as client
    from radium_interposer.proxy import stats
    _read, _send = wire.read, wire.send_chunks
    def _counted_read(readinto, limits=None):
        def counting(view):
            n = readinto(view)
            crossed["bytes_out"] += n
            return n
        return _read(counting, limits)
    def _counted_send(sock, chunks):
        crossed["bytes_in"] += sum(memoryview(c).nbytes for c in chunks)
        _send(sock, chunks)
    wire.read, wire.send_chunks = _counted_read, _counted_send
def settle():  # streamed calls still in flight run inside the timed run, as at the exit
    for conn in list(client.connections):
        if conn.pid == os.getpid() and not conn.broken:
            conn.sync()
for name in sys.argv[3].split(","):
    __import__(name)
functions = json.loads(sys.argv[5]) if len(sys.argv) > 5 else {}
times = []
for _ in range(int(sys.argv[4])):  # the runs after the first are timed: everything warm
    if functions:  # function mode: the program's functions are remoted as it defines them
        from radium_interposer import finder, main_module
        main_module.watch(functions, finder.remote_main_function)
    before = {**stats(), **crossed} if remote else {}
    counts = dict(client.counts) if remote else {}
    started = time.perf_counter()
    runpy.run_path(sys.argv[1], run_name="__main__")
    if remote:
        settle()
    times.append(time.perf_counter() - started)
warm = sorted(times[1:] or times)
report = {"seconds": warm[len(warm) // 2], "runs": times}  # the warm runs' median
if remote:
    report["counts"] = {k: client.counts[k] - counts[k] for k in counts}
    frames = dict(crossed)  # before the stats call's own frames
    after = {**stats(), **frames}
    report.update({k: after[k] - before[k] for k in ("calls", "bytes_in", "bytes_out")})
print(json.dumps(report), file=sys.stderr)
"""


#: np.vectorize with a lambda (one callback per element) and with a shipped top-level function.
CALLBACKS = """
import json, sys, time
import numpy as np

def shipped(v):
    return v + 1

def main(n):
    values = np.arange(n)
    report = {}
    for name, function in (("shipped", shipped), ("lambda", lambda v: v + 1)):
        np.vectorize(function)(values[:8])  # warm: shipping, call sites
        started = time.perf_counter()
        total = int(np.asarray(np.vectorize(function)(values)).sum())
        report[name] = time.perf_counter() - started
        assert total == n * (n + 1) // 2, total
    print(json.dumps(report), file=sys.stderr)

main(int(sys.argv[1]))
"""


def callback_cost(harness: WorkerHarness, root: Path, n: int) -> None:
    script = root / "callbacks.py"
    script.write_text(CALLBACKS)
    _, stderr = timed([sys.executable, str(script), str(n)], {"PATH": os.environ["PATH"]}, root)
    local = json.loads(stderr.strip().splitlines()[-1])
    _, stderr = timed([BARE_PYTHON, str(script), str(n)], harness.env("numpy"), root)
    remote = json.loads(stderr.strip().splitlines()[-1])
    per_callback = (remote["lambda"] - remote["shipped"]) / n * 1e6
    print(f"\nnp.vectorize over {n} elements (ms)   local  remoted  ratio")
    for name in ("shipped", "lambda"):
        print(f"  {name + (' (callbacks)' if name == 'lambda' else ' (no callbacks)'):<32}"
              f"{local[name] * 1e3:7.1f} {remote[name] * 1e3:8.1f} "
              f"{remote[name] / local[name]:6.1f}")  # fmt: skip
    print(
        f"  one callback costs {per_callback:.0f} us (lambda minus shipped, per element); "
        f"{n / remote['lambda']:.0f} callbacks/s"
    )


def function_mode(root: Path, runs: int, programs: list[Path]) -> None:
    """What a split file of the program's own functions brings: they run whole on the worker.
    Each program gets a worker of its own, as each would get its lease: the main-program
    functions of two programs shipped to one worker share its ``radium_shipped.__main__``."""
    print(
        "\nfunction mode (module mode + the program's functions in the split file), warm, "
        "streaming, over the local link:"
    )
    print(f"{'program':<26} {'local':>8} {'module':>8} {'ratio':>6} {'calls':>6}"
          f" {'function':>9} {'ratio':>6} {'calls':>6}")  # fmt: skip
    for program in (p for p in programs if p in WITH_FUNCTIONS):
        (root / "function-mode" / name_of(program)).mkdir(parents=True)
        harness = WorkerHarness(root / "function-mode" / name_of(program))
        try:
            plain = {"PATH": os.environ["PATH"]}
            local = _warm([sys.executable, "-c", RUNNER, str(program), "local",
                           remote_for(program), str(runs)], plain, root)  # fmt: skip
            env = harness.env(remote_for(program))
            module = _warm([BARE_PYTHON, "-c", RUNNER, str(program), "remote",
                            remote_for(program), str(runs)], env, root)  # fmt: skip
            functions = json.dumps({program.stem: functions_of(program)})
            split = _warm([BARE_PYTHON, "-c", RUNNER, str(program), "remote",
                           remote_for(program), str(runs), functions], env, root)  # fmt: skip
            print(f"{name_of(program):<26} {local['seconds']:8.3f} {module['seconds']:8.3f} "
                  f"{module['seconds'] / local['seconds']:6.2f} {module['calls']:6d} "
                  f"{split['seconds']:9.3f} {split['seconds'] / local['seconds']:6.2f} "
                  f"{split['calls']:6d}")  # fmt: skip
        finally:
            harness.close()


def _warm(argv: list[str], env: dict[str, str], cwd: Path) -> dict[str, float]:
    _, stderr = timed(argv, env, cwd)
    report: dict[str, float] = json.loads(stderr.strip().splitlines()[-1])
    return report


def make_harness(root: Path, link: str, delay_us: float) -> WorkerHarness:
    """The worker, reached over a socketpair (``local``) or through a delay relay (``dc``)."""
    if link == "local":
        print("link: local (the agent stand-in's socketpair, no network)")
        return WorkerHarness(root)
    harness = RelayedHarness(root, delay_us)
    print(f"link: dc, a user-space relay holding each chunk >= {delay_us:.0f} us each way "
          f"(no sch_netem in this kernel); measured 32 B TCP RTT p50 {harness.link_rtt:.0f} us "
          f"through it, {harness.direct_rtt:.0f} us without it")  # fmt: skip
    return harness


HEADER = (
    f"{'program':<26} {'whole: local':>12} {'s=0':>6} {'strm':>6} {'warm: local':>11} "
    f"{'s=0':>7} {'ratio':>6} {'no-x':>7} {'ratio':>6} {'strm':>7} {'ratio':>6} {'calls':>6} "
    f"{'rt s=0':>7} {'streamed':>8} {'express':>7} {'rt strm':>7} {'KiB in':>7} {'KiB out':>8}"
)


def one_program(harness: WorkerHarness, root: Path, program: Path, runs: int) -> dict[str, Any]:
    """Its reports, local and per remoted mode, and its table row."""
    args = ["-c", RUNNER, str(program), "local", remote_for(program), str(runs)]
    reports = {"local": remoted.run(harness, "local", args, remote_for(program), root)}
    args[3] = "remote"
    for mode in remoted.MODES:
        reports[mode] = remoted.run(harness, mode, args, remote_for(program), root)
    local, off, on = reports["local"], reports["nostream"], reports["stream"]
    full = reports["noexpress"]
    warm = local["seconds"]
    print(f"{name_of(program):<26} {local['whole']:12.2f} {off['whole']:6.2f} {on['whole']:6.2f} "
          f"{warm:11.3f} {off['seconds']:7.3f} {off['seconds'] / warm:6.2f} "
          f"{full['seconds']:7.3f} {full['seconds'] / warm:6.2f} "
          f"{on['seconds']:7.3f} {on['seconds'] / warm:6.2f} "
          f"{on['counts']['calls']:6d} {off['counts']['round_trips']:7d} "
          f"{on['counts']['streamed']:8d} {on['counts'].get('express', 0):7d} "
          f"{on['counts']['round_trips']:7d} "
          f"{on['bytes_in'] / 1024:7.1f} {on['bytes_out'] / 1024:8.1f}", flush=True)  # fmt: skip
    return reports


def corpus(harness: WorkerHarness, root: Path, runs: int, programs: list[Path]) -> None:
    """The table, then the ratios' summary and the stats files' sums."""
    print(f"\nwarm: the median of runs 2 to {runs} in one process, in seconds; "
          "ratio: remoted/local; "
          "s=0: RADIUM_STREAM=0 (every call waits), no-x: RADIUM_EXPRESS=0 (streaming, every "
          "call down the full path), strm: streaming (the default);\n"
          "calls, streamed, express (sent by their plan), rt (round trips): the last run, "
          "counted by the client; "
          "KiB: its frames in/out of the worker, streaming")  # fmt: skip
    print(HEADER)
    ratios: dict[str, dict[str, list[tuple[float, str]]]] = {
        kind: {mode: [] for mode in remoted.MODES} for kind in ("torch", "numpy")
    }
    files = {mode: dict.fromkeys((*remoted.COUNTS, "processes"), 0) for mode in remoted.MODES}
    for program in programs:
        reports = one_program(harness, root, program, runs)
        kind = "torch" if name_of(program).startswith("torch") else "numpy"
        for mode in remoted.MODES:
            ratio = reports[mode]["seconds"] / reports["local"]["seconds"]
            ratios[kind][mode].append((ratio, name_of(program)))
            for key, value in reports[mode]["totals"].items():
                files[mode][key] += value
    for line in remoted.ratio_summary(ratios):
        print(line)
    for mode, sums in files.items():
        print(f"RADIUM_STATS_FILE sums, {remoted.LABELS[mode]} ({sums['processes']} processes, "
              f"all {runs} runs each): calls {sums['calls']}, streamed {sums['streamed']}, "
              f"express {sums['express']}, waited {sums['waited']} (as records), "
              f"round trips {sums['round_trips']}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.programs")
    parser.add_argument("--runs", type=int, default=5, help="per process: the first warms up")
    parser.add_argument("--callbacks", type=int, default=5000, metavar="N")
    parser.add_argument("--programs", help="these corpus programs only (comma-separated names)")
    parser.add_argument("--link", choices=("local", "dc"), default="local")
    parser.add_argument("--delay-us", type=float, default=50.0, help="--link dc: each way")
    args = parser.parse_args(argv)
    programs = PROGRAMS
    if args.programs:
        wanted = args.programs.split(",")
        programs = [p for p in PROGRAMS if name_of(p) in wanted]
        if len(programs) != len(wanted):
            parser.error(f"--programs: not all of {wanted} are in tests/programs")
    machine = Machine()
    print(machine.line("start"))
    root = Path(tempfile.mkdtemp(prefix="radium-programs-"))
    harness = make_harness(root, args.link, args.delay_us)
    try:
        callback_cost(harness, root, args.callbacks)
        corpus(harness, root, args.runs, programs)
    finally:
        harness.close()
    function_mode(root, args.runs, programs)
    print(machine.line("end"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
