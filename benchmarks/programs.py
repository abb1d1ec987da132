"""The corpus of real programs (tests/programs), each run locally and remoted, side by side.

    .venv/bin/python -m benchmarks.programs [--runs 2] [--programs NAME,...]

Locally: this Python, with torch and numpy, no remoting. Remoted: a Python without them
(``/usr/bin/python3``) whose torch/numpy run on a worker on this machine (loopback, one worker
for the whole run). Each program runs ``--runs`` times in one process each way. Printed per
program:
- the whole process's wall time each way and their ratio (the local one includes importing
  torch, which the remoted client never does);
- the last run's own execution, everything warm on both sides, and that ratio (the comparison
  that matters once a program is going);
- the worker's calls (and calls per second), and the bytes of that run's frames in and out of
  the worker, counted by the client (a worker's own counters hold buffer bytes only, and a
  numpy-less client gets small arrays as values in the frame's metadata, not as buffers).
Then function mode for the programs that have functions: the same, with a split file that also
names the program's own functions (they then run whole on the worker: fewer round trips).
Then the cost of a callback (the worker calling a local lambda): ``np.vectorize`` over
``--callbacks`` elements with a lambda (called back once per element), against the same with a
top-level function (shipped: no callbacks) and against running it all locally.
Nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.interposer.harness import BARE_PYTHON, WorkerHarness
from tests.programs.test_corpus import (
    PROGRAMS,
    WITH_FUNCTIONS,
    functions_of,
    name_of,
    remote_for,
)

#: Runs the program as __main__ (what shipping needs) with its frameworks imported before the
#: clock starts, so only the program's own work is timed; remoted, with the worker's counters.
RUNNER = """
import json, os, runpy, sys, time
remote = sys.argv[2] == "remote"
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[1])))  # as `python FILE` does
crossed = {"bytes_in": 0, "bytes_out": 0}  # whole frames, as this client sends and reads them
if remote:
    import radium_interposer.boot
    from radium_interposer import wire
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
for name in sys.argv[3].split(","):
    __import__(name)
functions = json.loads(sys.argv[5]) if len(sys.argv) > 5 else {}
for _ in range(int(sys.argv[4])):  # the last run is timed: everything warm on both sides
    if functions:  # function mode: the program's functions are remoted as it defines them
        from radium_interposer import finder, main_module
        main_module.watch(functions, finder.remote_main_function)
    before = {**stats(), **crossed} if remote else {}
    started = time.perf_counter()
    runpy.run_path(sys.argv[1], run_name="__main__")
    report = {"seconds": time.perf_counter() - started}
if remote:
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
    print("\nfunction mode (module mode + the program's functions in the split file), warm:")
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


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=900)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{argv[-1]} failed: {done.stderr[-2000:]}")
    return elapsed, done.stderr


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.programs")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--callbacks", type=int, default=5000, metavar="N")
    parser.add_argument("--programs", help="these corpus programs only (comma-separated names)")
    args = parser.parse_args(argv)
    programs = PROGRAMS
    if args.programs:
        wanted = args.programs.split(",")
        programs = [p for p in PROGRAMS if name_of(p) in wanted]
        if len(programs) != len(wanted):
            parser.error(f"--programs: not all of {wanted} are in tests/programs")
    root = Path(tempfile.mkdtemp(prefix="radium-programs-"))
    harness = WorkerHarness(root)
    ratios: dict[str, list[float]] = {"torch": [], "numpy": []}
    try:
        callback_cost(harness, root, args.callbacks)
        print(f"\n{'program':<26} {'whole: local':>12} {'remote':>7} {'ratio':>6} "
              f"{'warm: local':>12} {'remote':>7} {'ratio':>6} {'calls':>7} {'calls/s':>8} "
              f"{'KiB in':>7} {'KiB out':>8}")  # fmt: skip
        for program in programs:
            plain = {"PATH": os.environ["PATH"]}
            runs = str(args.runs)
            local, stderr = timed([sys.executable, "-c", RUNNER, str(program), "local",
                                   remote_for(program), runs], plain, root)  # fmt: skip
            warm_local = json.loads(stderr.strip().splitlines()[-1])["seconds"]
            env = harness.env(remote_for(program))
            remote, stderr = timed([BARE_PYTHON, "-c", RUNNER, str(program), "remote",
                                    remote_for(program), runs], env, root)  # fmt: skip
            used = json.loads(stderr.strip().splitlines()[-1])
            warm = used["seconds"]
            ratios["torch" if name_of(program).startswith("torch") else "numpy"].append(
                warm / warm_local
            )
            print(f"{name_of(program):<26} {local:12.2f} {remote:7.2f} {remote / local:6.2f} "
                  f"{warm_local:12.3f} {warm:7.3f} {warm / warm_local:6.2f} {used['calls']:7d} "
                  f"{used['calls'] / warm:8.0f} {used['bytes_in'] / 1024:7.1f} "
                  f"{used['bytes_out'] / 1024:8.1f}")  # fmt: skip
    finally:
        harness.close()
    function_mode(root, args.runs, programs)
    for kind, values in ratios.items():
        if values:
            print(
                f"median warm remote/local ratio, {kind} programs: {statistics.median(values):.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
