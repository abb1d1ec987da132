"""The three checks of gpu-check, each adding its rows to the table.

Each compares what the remoted run gave with what it must give: the same numbers as the local
run (smoke, training), the memory limit enforced with a clean error, each half-GPU lease's
throughput near half of a whole lease's, and the other lease's result right while one exceeds
its memory. In a dry run (CPU backend, fractions unenforced) the GPU-only judgements are
skipped and say so; their figures are still shown.
"""

from __future__ import annotations

import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpucheck.runs import Runner, WorkloadFailed
from gpucheck.table import SKIP, Table

__all__ = ["Sizes", "fractions", "smoke", "train"]

#: What a half-GPU lease's matmul throughput may be, over a whole lease alone's, to count as
#: "about its share" (measured on an H100: 0.50 with both running, 0.56 alone).
SHARE_RANGE = (0.3, 0.75)
NOT_ON_CPU = "dry run: not enforced on the CPU backend"
#: How far a remoted loss may be from the local one (relative, plus as much absolute): cuDNN's
#: non-deterministic sums (atomics in some backward kernels) differ in their last bits.


@dataclass(frozen=True)
class Sizes:
    """How big each workload is: matmul side and seconds, training steps and batch."""

    size: int
    seconds: float
    steps: int
    batch: int
    memory: bool  # the memory phases (GPU only)

    @property
    def matmul(self) -> list[str]:
        return ["--size", str(self.size), "--seconds", str(self.seconds)]


GPU = Sizes(size=8192, seconds=6.0, steps=300, batch=64, memory=True)
DRY = Sizes(size=64, seconds=0.3, steps=30, batch=8, memory=False)


def _relative(a: float, b: float) -> float:
    return abs(a - b) / max(abs(a), abs(b), 1e-12)


def smoke(runner: Runner, table: Table, sizes: Sizes) -> float:
    """A seeded matmul remoted and locally; the first call's time; a whole lease's matmul
    rate alone (what the fractions are compared with; 0 when it failed)."""
    try:
        local = runner.local("smoke", sizes.matmul)
        remote = runner.remote("smoke", sizes.matmul, ["--gpus", "1"])
    except WorkloadFailed as exc:
        table.add("tensor smoke: remoted = local", "FAIL", str(exc))
        return 0.0
    table.ok("device (remoted torch)", f"{remote['device_name']}, torch {remote['torch']}")
    diff = _relative(remote["sum"], local["sum"])
    table.judge(
        "tensor smoke: remoted = local",
        diff <= 1e-5 and _relative(remote["corner"], local["corner"]) <= 1e-5,
        f"sum of relu(A@B), {sizes.size}^2: {remote['sum']:.6g} vs {local['sum']:.6g} "
        f"(relative difference {diff:.1e})",
    )
    table.ok(
        "first device call after grant",
        f"{remote['first_call_ms']:.0f} ms from program start (granted; worker imports "
        f"torch), "
        f"{remote['since_launch_ms']:.0f} ms from radium exec's start (local, with import "
        f"torch and device init: {local['first_call_ms']:.0f} ms)",
    )
    return float(remote["alone_rate"])


def train(runner: Runner, table: Table, sizes: Sizes) -> None:
    """The CNN trained remoted and locally: the same losses, and step time."""
    args = ["--steps", str(sizes.steps), "--batch", str(sizes.batch)]
    try:
        local = runner.local("train", args)
        remote = runner.remote("train", args, ["--gpus", "1"])
    except WorkloadFailed as exc:
        table.add("training: losses remoted = local", "FAIL", str(exc))
        return
    pairs = list(zip(remote["losses"], local["losses"]))
    worst = max((abs(r - lo) for r, lo in pairs), default=float("inf"))
    # Exactly: deterministic algorithms on both sides (workload.train), the same GPU.
    same = remote["losses"] == local["losses"]
    falls = remote["losses"][-1] < remote["losses"][0]
    table.judge(
        "training: losses remoted = local",
        same and falls,
        f"{sizes.steps} steps: loss {remote['losses'][0]:.4f} -> {remote['losses'][-1]:.4f} "
        f"(local -> {local['losses'][-1]:.4f}); largest difference {worst:.1e}",
    )
    ratio = remote["step_ms"] / local["step_ms"]
    table.ok(
        "training: step time remoted/local",
        f"{remote['step_ms']:.2f} ms vs {local['step_ms']:.2f} ms: ratio {ratio:.2f}x",
    )


def fractions(runner: Runner, table: Table, sizes: Sizes, alone: float) -> None:
    """Two 0.5 leases at once, meeting between phases (workload.py fraction)."""
    with tempfile.TemporaryDirectory(dir=runner.cwd) as sync:
        args = [*sizes.matmul, "--sync", sync, "--memory", str(int(sizes.memory))]
        started = {
            role: runner.remote_start("fraction", [*args, "--role", role], ["--fraction", "0.5"])
            for role in ("a", "b")
        }
        abort = Path(sync) / "abort"

        def result(role: str) -> dict[str, Any]:
            try:
                return runner.result(started[role], f"fraction lease {role}")
            except WorkloadFailed:
                abort.write_text("")  # the other stops at its next meeting, not after minutes
                raise

        results: dict[str, dict[str, Any]] = {}
        failures = []
        with ThreadPoolExecutor(2) as pool:
            waits = {role: pool.submit(result, role) for role in started}
            for role, wait in waits.items():
                try:
                    results[role] = wait.result()
                except WorkloadFailed as exc:
                    failures.append(str(exc))
    if failures:
        table.add("fractions: two 0.5 leases at once", "FAIL", "; ".join(failures))
        return
    a, b = results["a"], results["b"]
    held = [got["lease"] for got in (a, b)]
    table.judge(
        "fractions: two 0.5 leases at once",
        all(h.get("fraction") == 0.5 for h in held)
        and held[0].get("devices") == held[1].get("devices")
        and held[0].get("id") != held[1].get("id"),
        "; ".join(
            f"{role}: fraction {h.get('fraction')} of {','.join(h.get('devices', []))}, "
            f"{h.get('memory_mib')} MiB"
            for role, h in zip("ab", held)
        ),
    )
    _memory_rows(table, a, b, sizes)
    _share_row(table, a, b, alone, sizes)
    isolated = a["right"] and a["steps"] > 0 and (b["refused"] > 0 or not sizes.memory)
    figures = f"a: {a['steps']} checked matmuls, all right: {a['right']}; b meanwhile: "
    if sizes.memory:
        figures += f"{b['refused']} allocations over its limit refused, {b['filled']} to 80%"
    else:
        figures += "idle (dry run: no limit to exceed on the CPU backend)"
    table.judge("fractions: b over its memory, a unharmed", isolated, figures)


def _memory_rows(table: Table, a: dict[str, Any], b: dict[str, Any], sizes: Sizes) -> None:
    if not sizes.memory:
        table.add("fractions: memory limit enforced", SKIP, NOT_ON_CPU)
        return
    for role, got in (("a", a), ("b", b)):
        table.judge(
            f"fraction {role}: allocates to its limit",
            got["limit_mib"] > 0 and got["within_ok"],
            f"limit {got['limit_mib']} MiB: 80% of it allocated and written",
        )
        table.judge(
            f"fraction {role}: beyond it, a clean OOM",
            bool(got["beyond_error"]) and got["usable_after"],
            f"110% refused: {got['beyond_error'] or 'no, it was allocated'}; "
            f"lease usable after: {got['usable_after']}",
        )


def _share_row(
    table: Table, a: dict[str, Any], b: dict[str, Any], alone: float, sizes: Sizes
) -> None:
    """A half lease alone is held to its share (time-slicing alone would give it all of the
    device); both at once each get about half."""
    solo = a["solo_rate"] / alone if alone else 0.0
    solo_figures = (
        f"matmuls/s: a alone {a['solo_rate']:.2f}, a whole lease {alone:.2f} ({solo:.2f})"
    )
    if sizes.memory:
        table.judge("fraction a alone: held to its share", 0 < solo <= SHARE_RANGE[1], solo_figures)
    else:
        table.add("fraction a alone: held to its share", SKIP, f"{NOT_ON_CPU}; {solo_figures}")
    shares = [got["rate"] / alone if alone else 0.0 for got in (a, b)]
    figures = (
        f"matmuls/s: whole lease alone {alone:.2f}; a {a['rate']:.2f} ({shares[0]:.2f}), "
        f"b {b['rate']:.2f} ({shares[1]:.2f}) at once"
    )
    if not sizes.memory:
        table.add("fractions: each about half", SKIP, f"{NOT_ON_CPU}; {figures}")
        return
    low, high = SHARE_RANGE
    table.judge("fractions: each about half", all(low <= s <= high for s in shares), figures)
