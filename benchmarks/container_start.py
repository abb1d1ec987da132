"""Container start cost of Radium, measured side by side in one run.

Alternates, on the same image and command, in a private dockerd:
  runc          docker run --rm IMG true
  radium-pass   docker run --rm --runtime=radium IMG true                  (wrapper only)
  radium        docker run --rm --runtime=radium -e RADIUM_GPUS=1 IMG true (wrapper + hooks)
and prints median and p90 of each, the milliseconds added over runc and the ratio.

    sudo .venv/bin/python -m benchmarks.container_start [--runs 15] [--install VENV]

--install measures the Radium installed in another virtualenv, e.g. a non-editable
`pip install .` as users get it (an editable install adds a path-finder to every start).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from integration import images
from integration.dockerd import Dockerd
from integration.radium_env import make_env

VARIANTS: dict[str, tuple[str, ...]] = {
    "runc": (),
    "radium-pass": ("--runtime=radium",),
    "radium": ("--runtime=radium", "-e", "RADIUM_GPUS=1"),
}


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=15, help="runs of each variant (default 15)")
    parser.add_argument("--suite", default="bookworm", choices=images.SUITES)
    parser.add_argument("--install", type=Path, help="virtualenv whose Radium to measure")
    args = parser.parse_args(argv)

    scripts = args.install / "bin" if args.install else None
    radium = make_env(Path(tempfile.mkdtemp(prefix="radium-bench-")), scripts)
    daemon = Dockerd({"radium": radium.runtime}, radium.environ())
    samples: dict[str, list[float]] = {name: [] for name in VARIANTS}
    try:
        daemon.start()
        tag = f"radium-bench/{args.suite}"
        daemon.import_image(images.debian_tar(args.suite), tag)
        for extra in VARIANTS.values():  # warm caches: page cache, image layers, python bytecode
            daemon.docker("run", "--rm", "--network", "none", *extra, tag, "true")
        for _ in range(args.runs):
            for name, extra in VARIANTS.items():
                start = time.perf_counter()
                daemon.docker("run", "--rm", "--network", "none", *extra, tag, "true")
                samples[name].append((time.perf_counter() - start) * 1000)
    finally:
        daemon.stop()
        shutil.rmtree(radium.root, ignore_errors=True)

    base = statistics.median(samples["runc"])
    print(f"container start, docker run --rm {args.suite} true, {args.runs} runs each, alternating")
    print(f"radium-runtime: {radium.runtime}")
    print(f"{'variant':<12} {'median ms':>10} {'p90 ms':>8} {'added ms':>9} {'ratio':>6}")
    for name, values in samples.items():
        median, p90 = statistics.median(values), percentile(values, 0.9)
        print(f"{name:<12} {median:>10.1f} {p90:>8.1f} {median - base:>9.1f} {median / base:>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
