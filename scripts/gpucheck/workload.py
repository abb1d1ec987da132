"""What gpu-check runs with torch: locally (a Python with torch) and remoted (``radium exec
--remote torch`` from a Python without it). The same file both ways, so the two are the same
program; its one result is the last line of stdout, ``GPUCHECK {json}``.

    workload.py smoke    --device D --size N --seconds S
    workload.py train    --device D --steps N --batch B
    workload.py fraction --device D --size N --seconds S --role a|b --sync DIR [--limit-mib M]

``smoke``: a seeded matmul (its sum, compared with the local run's), the first device call's
time since this program started, and matmul throughput of a lease alone. ``train``: a small CNN
trained on synthetic data, its losses and step time. ``fraction``: one of two fractional leases
running at once (``--sync`` is a folder both see: they meet there between phases): allocate
80% of the lease's memory, then 110% (a clean OutOfMemoryError, the lease still usable);
matmul throughput of ``a`` alone, then of both at once; then ``a`` computes a known result
while ``b`` keeps exceeding its memory.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

STARTED = time.time()  # before torch: the first device call is timed from here

# Deterministic cuBLAS (train() asks for deterministic algorithms), here and, forwarded as
# a framework setting, on the worker.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
import torch  # noqa: E402 - after the clock starts
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

#: How long one side waits for the other at a meeting point.
MEET_TIMEOUT = 180.0


def report(result: dict[str, Any]) -> None:
    print("GPUCHECK " + json.dumps(result), flush=True)


def first_call_ms(device: torch.device) -> tuple[float, float]:
    """The first call that reaches the device, until its answer is here: since this program
    started, and since ``GPUCHECK_LAUNCHED`` (when ``radium exec`` was started)."""
    float(torch.ones(1, device=device).sum())
    now = time.time()
    launched = float(os.environ.get("GPUCHECK_LAUNCHED", STARTED))
    return (now - STARTED) * 1e3, (now - launched) * 1e3


def matmul_rate(device: torch.device, size: int, seconds: float) -> float:
    """size x size matmuls a second for ``seconds``: compute-bound; waits every few."""
    a, b = torch.randn(size, size, device=device), torch.randn(size, size, device=device)
    float((a @ b)[0, 0])  # warm: kernels chosen, memory held
    done, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        for _ in range(4):
            c = a @ b
        float(c[0, 0])  # waits for the four
        done += 4
    return done / (time.perf_counter() - started)


def smoke(args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    first_ms, since_launch_ms = first_call_ms(device)
    torch.manual_seed(0)
    a = torch.randn(args.size, args.size, device=device)
    b = torch.randn(args.size, args.size, device=device)
    c = torch.relu(a @ b)
    cuda = device.type == "cuda"
    return {
        "first_call_ms": first_ms,
        "since_launch_ms": since_launch_ms,
        "sum": float(c.sum()),
        "corner": float(c[0, 0]),
        "torch": str(torch.__version__),
        "device_name": str(torch.cuda.get_device_name(0)) if cuda else "cpu",
        "alone_rate": matmul_rate(device, args.size, args.seconds),
    }


class Net(nn.Module):
    """Two convolutions and a linear layer: an MNIST-sized CNN."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3)
        self.conv2 = nn.Conv2d(16, 32, 3)
        self.fc = nn.Linear(32 * 5 * 5, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        out: torch.Tensor = self.fc(torch.flatten(x, 1))
        return out


def train(args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    """SGD on images labelled by a fixed random teacher (so the loss falls); the losses every
    25 steps, and the time of a step once warm (20 steps), waited for at the end."""
    torch.manual_seed(0)
    # Both sides sum in one order: the losses must be the same, bit for bit.
    torch.use_deterministic_algorithms(True)
    batches = 8
    images = torch.randn(batches * args.batch, 1, 28, 28, device=device)
    teacher = torch.randn(28 * 28, 10, device=device)
    labels = (torch.flatten(images, 1) @ teacher).argmax(1)
    model = Net().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses: list[float] = []
    warm = min(20, args.steps // 2)
    started, loss = 0.0, torch.zeros(())
    for step in range(args.steps):
        if step == warm:
            loss.item()  # the warm steps done
            started = time.perf_counter()
        i = step % batches
        x = images[i * args.batch : (i + 1) * args.batch]
        y = labels[i * args.batch : (i + 1) * args.batch]
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()  # type: ignore[no-untyped-call]
        optimizer.step()
        if step % 25 == 0 or step == args.steps - 1:
            losses.append(loss.item())
    loss.item()
    step_ms = (time.perf_counter() - started) / (args.steps - warm) * 1e3
    return {"losses": losses, "step_ms": step_ms}


def meet(sync: Path, phase: str, role: str) -> None:
    """Say this side reached ``phase``; wait for the other side to reach it too."""
    (sync / f"{phase}.{role}").write_text("")
    other = sync / f"{phase}.{'b' if role == 'a' else 'a'}"
    deadline = time.monotonic() + MEET_TIMEOUT
    while not other.exists():
        if (sync / "abort").exists():
            raise RuntimeError(f"the other lease failed before {phase}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the other lease never reached {phase}")
        time.sleep(0.02)


def lease() -> dict[str, Any]:
    """The lease (devices, fraction, memory_mib...), from the lease.json the agent writes into
    ``radium exec``'s runtime folder; {} when there is none."""
    path = Path(os.environ.get("RADIUM_RUNTIME_DIR", "/nonexistent")) / "lease.json"
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def allocate(device: torch.device, size: int) -> str:
    """Allocate ``size`` bytes and write them: "" when done, else the class of the error
    that refused it (an out-of-memory error: anything else is raised)."""
    try:
        block = torch.empty(size, dtype=torch.uint8, device=device)
        block.fill_(1)
        int(block[-1])  # waits: the error, if any, surfaces here
    except RuntimeError as exc:  # torch.OutOfMemoryError is one (remoted: its stand-in)
        if "OutOfMemoryError" not in type(exc).__name__:
            raise
        return type(exc).__name__
    del block
    torch.cuda.empty_cache()
    return ""


def memory(device: torch.device, limit: int) -> dict[str, Any]:
    within = allocate(device, limit * 4 // 5)
    beyond = allocate(device, limit * 11 // 10)
    usable = float(torch.ones(16, device=device).sum()) == 16.0
    return {"within_ok": not within, "beyond_error": beyond, "usable_after": usable}


def isolation(args: argparse.Namespace, device: torch.device, limit: int) -> dict[str, Any]:
    """``a``: ones @ ones is ``size`` everywhere, exactly, at every step; ``b``: exceeds its
    memory (and fills what it may) until ``a`` is done."""
    done = args.sync / "isolation-done"
    if args.role == "a":
        ones = torch.ones(args.size, args.size, device=device)
        steps, right, started = 0, True, time.perf_counter()
        while time.perf_counter() - started < args.seconds:
            right = right and bool(((ones @ ones) == args.size).all())
            steps += 1
        done.write_text("")
        return {"steps": steps, "right": right}
    refused = filled = 0
    deadline = time.monotonic() + MEET_TIMEOUT
    while not done.exists() and time.monotonic() < deadline:
        if (args.sync / "abort").exists():
            raise RuntimeError("the other lease failed")
        if limit:
            refused += bool(allocate(device, limit * 3 // 2))
            filled += not allocate(device, limit * 4 // 5)
        else:
            time.sleep(0.05)
    return {"refused": refused, "filled": filled}


def fraction(args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    held = lease()
    limit = (args.limit_mib or int(held.get("memory_mib", 0))) * 2**20 if args.memory else 0
    result: dict[str, Any] = {"limit_mib": limit // 2**20, "lease": held}
    meet(args.sync, "memory", args.role)
    if limit:
        result.update(memory(device, limit))
    meet(args.sync, "solo", args.role)
    if args.role == "a":  # alone on the device: held to its share all the same?
        result["solo_rate"] = matmul_rate(device, args.size, args.seconds)
    meet(args.sync, "share", args.role)
    result["rate"] = matmul_rate(device, args.size, args.seconds)
    meet(args.sync, "isolation", args.role)
    result.update(isolation(args, device, limit))
    return result


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="workload.py")
    parser.add_argument("what", choices=("smoke", "train", "fraction"))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--role", choices=("a", "b"), default="a")
    parser.add_argument("--sync", type=Path, default=Path("."))
    parser.add_argument("--memory", type=int, default=1, help="0: skip the memory phases")
    parser.add_argument("--limit-mib", type=int, default=0)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    run = {"smoke": smoke, "train": train, "fraction": fraction}[args.what]
    report(run(args, device))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
