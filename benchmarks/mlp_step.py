"""A training step of a small MLP, locally and remoted: µs per step and round trips per step.

    .venv/bin/python -m benchmarks.mlp_step [--reps 5] [--steps 200] [--warmup 20] [--smoke]
        [--device cpu|cuda]

The model is a 784-256-10 ``nn.Sequential`` (Linear, ReLU, Linear), batch 32, SGD lr 0.01 and
``CrossEntropyLoss``; its data is made where torch runs (on the worker, remoted) from a fixed
seed, on ``--device`` (``cuda``: the local run and the worker on this machine's GPU; the client
never has one). The step is ``zero_grad``, forward, loss, ``backward``, ``step``, as a training loop
writes it. Each way (this Python locally; remoted from ``/usr/bin/python3`` with ``--remote
torch``, every call waiting and streaming, as benchmarks/programs.py runs them) the program:
1. runs ``--check`` steps from the seed and reads the loss (printed: identical to local, or not:
   a measurement, not an assertion);
2. runs ``--warmup`` steps, then ``--reps`` repetitions of ``--steps`` steps, each ended by
   reading the loss (a sync: streamed work finishes inside the repetition);
3. reports the median repetition's µs per step and, remoted, the client's calls, streamed calls
   and round trips per step over the timed repetitions (its counters, read in the program; each
   repetition's closing loss read is one of them).
Nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import remoted
from benchmarks.machine import Machine
from tests.interposer.harness import WorkerHarness

PROGRAM = """
import json, os, sys, time
import torch
from torch import nn

reps, steps, warmup, check = map(int, sys.argv[1:5])
device = sys.argv[5]
counts = None
if os.environ.get("RADIUM_REMOTE"):
    from radium_interposer.client import state
    counts = state.counts

def setup():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(32, 784, device=device)
    y = torch.randint(0, 10, (32,), device=device)
    return model, optimizer, nn.CrossEntropyLoss(), x, y

def train(n, model, optimizer, loss_fn, x, y):
    for _ in range(n):
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
    return loss.item()  # a sync: every streamed call of the steps has run

parts = setup()
checked = train(check, *parts)
train(warmup, *parts)
before = dict(counts) if counts is not None else {}
times = []
for _ in range(reps):
    started = time.perf_counter()
    train(steps, *parts)
    times.append(time.perf_counter() - started)
report = {"loss": repr(checked), "us_per_step": sorted(times)[len(times) // 2] / steps * 1e6}
if counts is not None:
    report["per_step"] = {k: (counts[k] - before[k]) / (reps * steps) for k in before}
print(json.dumps(report), file=sys.stderr)
"""

FULL = {"reps": 5, "steps": 200, "warmup": 20, "check": 10}
SMOKE = {"reps": 2, "steps": 3, "warmup": 1, "check": 2}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.mlp_step")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (the suite's run)")
    for name, value in FULL.items():
        parser.add_argument(f"--{name}", type=int, default=None, help=f"default {value}")
    parser.add_argument("--device", default="cpu", help="where torch runs: cpu (default), cuda")
    args = parser.parse_args(argv)
    sizes = {**(SMOKE if args.smoke else FULL)}
    sizes.update({k: getattr(args, k) for k in FULL if getattr(args, k) is not None})
    machine = Machine()
    print(machine.line("start"))
    root = Path(tempfile.mkdtemp(prefix="radium-mlp-"))
    script = root / "mlp.py"
    script.write_text(PROGRAM)
    harness = WorkerHarness(root)
    try:
        numbers = (str(sizes[k]) for k in ("reps", "steps", "warmup", "check"))
        argv_ = [str(script), *numbers, args.device]
        reports = {mode: remoted.run(harness, mode, argv_, "torch", root)
                   for mode in ("local", *remoted.MODES)}  # fmt: skip
    finally:
        harness.close()
    table(reports, sizes, args.device)
    print(machine.line("end"))
    return 0


def table(reports: dict[str, dict[str, Any]], sizes: dict[str, int], device: str) -> None:
    """One row per way: µs per step, ratio to local, per-step counts, loss identical."""
    local = reports["local"]
    print(f"784-256-10 MLP on {device}, batch 32, SGD + CrossEntropyLoss: "
          f"median of {sizes['reps']} x "
          f"{sizes['steps']} steps after {sizes['warmup']} warm-up; loss after "
          f"{sizes['check']} steps from seed 0")  # fmt: skip
    print(f"  {'':<10} {'us/step':>9} {'ratio':>6} {'calls/step':>11} {'streamed/step':>14} "
          f"{'round trips/step':>17}  loss identical to local")  # fmt: skip
    print(f"  {'local':<10} {local['us_per_step']:9.1f} {1:6.2f} {'-':>11} {'-':>14} {'-':>17}"
          f"  (loss {local['loss']})")  # fmt: skip
    for mode in remoted.MODES:
        r = reports[mode]
        per = r["per_step"]
        same = "yes" if r["loss"] == local["loss"] else f"no ({r['loss']})"
        print(f"  {remoted.LABELS[mode]:<10} {r['us_per_step']:9.1f} "
              f"{r['us_per_step'] / local['us_per_step']:6.2f} {per['calls']:11.2f} "
              f"{per['streamed']:14.2f} {per['round_trips']:17.2f}  identical: {same}")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
