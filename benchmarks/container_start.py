"""Container start cost of Radium, measured side by side in one run.

Alternates, on the same image and command, each engine private to this run:

  docker      runc           docker run --rm IMG true
              radium-pass    docker run --rm --runtime=radium IMG true          (front only)
              radium-leased  docker run --rm --runtime=radium -e RADIUM_GPUS=1 IMG true
  containerd  runc.v2        ctr run --rm --runtime io.containerd.runc.v2 IMG ID true
              radium-pass    ctr run --rm --runtime io.containerd.radium.v2 IMG ID true
              radium-leased  ctr run --rm --runtime io.containerd.radium.v2
                               --annotation radium.io/gpus=1 IMG ID true
  CRI         runc           RunPodSandbox (handler runc) + CreateContainer + StartContainer
              radium-pass    the same with runtime_handler radium
              radium-leased  the same with the pod annotation radium.io/gpus=1

and prints median and p90 of each, the milliseconds added over the engine's plain runc and the
ratio. The CRI rows are what kubelet asks of containerd to start a pod of one container
(`radium setup containerd`'s runtime handler; the pod is stopped and removed after the clock
stops). A leased start is the whole of it: the node agent (started by the warm-up run) takes a
lease from a local SQLite pool with one CPU acceptor, the bundle is mounted, the container
runs, the lease is given back.

    sudo .venv/bin/python -m benchmarks.container_start [--runs 15] [--install VENV]

--install measures the Radium installed in another virtualenv, e.g. a non-editable
`pip install .` as users get it (an editable install adds a path-finder to every start). The
first line says whether that installation's agent client and fronts are the C ones
(`radium setup ENGINE` builds them where a compiler is; without them a leased start costs
25 to 45 ms more).
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from integration import images
from integration.containerd import Containerd
from integration.cri.client import Pod
from integration.cri.node import cri_node
from integration.dockerd import Dockerd
from integration.pool import PoolCluster
from integration.radium_env import RadiumEnv, make_env
from integration.test_leases import stop_agent
from radium.agent import nativeclient

DOCKER: dict[str, tuple[str, ...]] = {
    "runc": (),
    "radium-pass": ("--runtime=radium",),
    "radium-leased": ("--runtime=radium", "-e", "RADIUM_GPUS=1"),
}
CONTAINERD: dict[str, tuple[str, ...]] = {
    "runc.v2": ("--runtime", "io.containerd.runc.v2"),
    "radium-pass": ("--runtime", "io.containerd.radium.v2"),
    "radium-leased": ("--runtime", "io.containerd.radium.v2", "--annotation", "radium.io/gpus=1"),
}
#: runtime handler, then pod annotations as NAME=VALUE
CRI: dict[str, tuple[str, ...]] = {
    "runc": ("runc",),
    "radium-pass": ("radium",),
    "radium-leased": ("radium", "radium.io/gpus=1"),
}


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def alternate(
    variants: dict[str, tuple[str, ...]],
    runs: int,
    start: Callable[[tuple[str, ...]], Any],
    stop: Callable[[Any], None] = lambda started: None,
) -> dict[str, list[float]]:
    """Samples (ms) of ``start`` per variant; ``stop`` gets what it returned, off the clock."""
    for extra in variants.values():  # warm caches: page cache, image layers, python bytecode
        stop(start(extra))
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(runs):
        for name, extra in variants.items():
            began = time.perf_counter()
            started = start(extra)
            samples[name].append((time.perf_counter() - began) * 1000)
            stop(started)
    return samples


def docker_samples(
    radium: RadiumEnv, config: Path, suite: str, runs: int
) -> dict[str, list[float]]:
    daemon = Dockerd({"radium": radium.runtime}, radium.environ(config))
    try:
        daemon.start()
        tag = f"radium-bench/{suite}"
        daemon.import_image(images.debian_tar(suite), tag)
        return alternate(
            DOCKER,
            runs,
            lambda extra: daemon.docker("run", "--rm", "--network", "none", *extra, tag, "true"),
        )
    finally:
        daemon.stop()


def containerd_samples(
    radium: RadiumEnv, config: Path, suite: str, runs: int
) -> dict[str, list[float]]:
    env = radium.environ(config)
    env["PATH"] = f"{radium.runtime.parent}:{env['PATH']}"
    daemon = Containerd(env)
    counter = itertools.count()
    try:
        daemon.start()
        image = daemon.import_image(
            images.debian_tar(suite), f"docker.io/radium-bench/{suite}:latest"
        )
        return alternate(
            CONTAINERD,
            runs,
            lambda extra: daemon.ctr("run", "--rm", *extra, image, f"b{next(counter)}", "true"),
        )
    finally:
        daemon.stop()


def cri_samples(radium: RadiumEnv, config: Path, suite: str, runs: int) -> dict[str, list[float]]:
    image = f"docker.io/radium-bench/{suite}:cri"
    where = Path(tempfile.mkdtemp(prefix="radium-bench-cri-"))
    counter = itertools.count()
    try:
        with cri_node(radium, config, where, {image: images.debian_tar(suite)}) as (cri, _):

            def start(extra: tuple[str, ...]) -> Pod:
                annotations = dict(item.split("=", 1) for item in extra[1:])
                pod = cri.run_pod(f"b{next(counter)}", annotations, handler=extra[0])
                cri.start(cri.create(pod, "c", image, ["true"]))
                return pod

            def stop(pod: Pod) -> None:
                cri.stop_pod(pod)
                cri.remove_pod(pod)

            return alternate(CRI, runs, start, stop)
    finally:
        shutil.rmtree(where, ignore_errors=True)


def print_table(title: str, samples: dict[str, list[float]], baseline: str) -> None:
    base = statistics.median(samples[baseline])
    print(title)
    print(f"  {'variant':<14} {'median ms':>10} {'p90 ms':>8} {'added ms':>9} {'ratio':>6}")
    for name, values in samples.items():
        median, p90 = statistics.median(values), percentile(values, 0.9)
        print(
            f"  {name:<14} {median:>10.1f} {p90:>8.1f} {median - base:>9.1f} {median / base:>6.2f}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=15, help="runs of each variant (default 15)")
    parser.add_argument("--suite", default="bookworm", choices=images.SUITES)
    parser.add_argument("--install", type=Path, help="virtualenv whose Radium to measure")
    parser.add_argument("--engine", choices=("docker", "containerd", "cri", "all"), default="all")
    args = parser.parse_args(argv)

    scripts = args.install / "bin" if args.install else None
    radium = make_env(Path(tempfile.mkdtemp(prefix="radium-bench-")), scripts)
    (radium.root / "pool").mkdir()
    cluster = PoolCluster(radium.root / "pool")
    config = radium.client_config(
        "leased.toml", cluster.client_table(), radium.root / "agent", node="bench"
    )
    try:
        cluster.start_pool()
        cluster.start_acceptor("bench-acc", devices=4)
        cluster.wait_up("bench-acc")
        print(
            f"container start, {args.suite} image, command true, {args.runs} runs each, alternating"
        )
        built = (radium.runtime.parent / nativeclient.NAME).exists()
        print(
            f"radium installation: {radium.runtime.parent}, agent client and fronts in "
            + ("C" if built else "Python and sh (not built: `radium setup` builds them)")
        )
        if args.engine in ("docker", "all"):
            samples = docker_samples(radium, config, args.suite, args.runs)
            print_table("docker run --rm", samples, "runc")
        if args.engine in ("containerd", "all"):
            samples = containerd_samples(radium, config, args.suite, args.runs)
            print_table("ctr run --rm", samples, "runc.v2")
        if args.engine in ("cri", "all"):
            samples = cri_samples(radium, config, args.suite, args.runs)
            print_table("CRI: pod sandbox + container start", samples, "runc")
    finally:
        stop_agent(config)
        cluster.stop()
        shutil.rmtree(radium.root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
