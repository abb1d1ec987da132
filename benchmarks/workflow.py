"""Workflow benchmark: what the user's commands cost next to plain docker, in one run.

    sudo .venv/bin/python -m benchmarks.workflow [--runs 10] [--pulls 3]

- ``radium run --gpus 1 -- --rm IMG true`` vs ``docker run --rm IMG true`` (and vs
  ``docker run --runtime=radium -e RADIUM_GPUS=1``, to separate the CLI from the runtime),
  alternating, on one dockerd whose radium runtime leases from a pool;
- ``radium images add`` of an image to two acceptors (each its own dockerd and network
  namespace) vs ``docker pull`` of it on one of them, from a local registry.
Medians and ratios are printed; nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.own_network import OwnNetwork
from integration import images
from integration.dockerd import Dockerd
from integration.radium_env import make_env
from integration.site import RADIUM_CLI, open_site
from integration.test_leases import stop_agent

IMAGE = "radium-bench/bookworm:1"
#: The acceptors' namespaces (this benchmark's own: see benchmarks/own_network.py).
ACCEPTORS = ("wf-acc-a", "wf-acc-b")


def timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stderr}")
    return elapsed


def line(name: str, samples: list[float], base: list[float] | None = None) -> str:
    median = statistics.median(samples)
    text = f"  {name:<46} median {median * 1e3:8.0f} ms"
    if base:
        reference = statistics.median(base)
        text += f"   +{(median - reference) * 1e3:6.0f} ms   ratio {median / reference:5.2f}x"
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.workflow")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--pulls", type=int, default=3, help="0 measures no pulls")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("run as root: it starts dockerds and network namespaces", file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="radium-workflow-"))
    radium = make_env(root / "radium")
    network = OwnNetwork(prefix="10.213.11", bridge="rdmbr11", names=ACCEPTORS).open()
    config = None
    try:
        with open_site(network, radium, root / "site", ACCEPTORS) as site:
            config = radium.client_config(
                "workflow.toml", site.cluster.client_table(), root / "agent"
            )
            client = Dockerd({"radium": radium.runtime}, radium.environ(config))
            client.start()
            try:
                client.import_image(images.debian_tar("bookworm"), IMAGE)
                env = {**radium.environ(config), "DOCKER_HOST": f"unix://{client.socket}"}
                run_commands(client, env, args.runs)
                if args.pulls:  # 0: only the container starts
                    pulls(site, client, args.pulls)
            finally:
                client.stop()
    finally:
        if config is not None:
            stop_agent(config)
        network.close()
    return 0


def run_commands(client: Dockerd, env: dict[str, str], runs: int) -> None:
    docker = [client.client, "-H", f"unix://{client.socket}", "run", "--rm", "--network", "none"]
    variants = {
        "docker run --rm IMG true (runc)": [*docker, IMAGE, "true"],
        "docker run --runtime=radium -e RADIUM_GPUS=1": [
            *docker, "--runtime=radium", "-e", "RADIUM_GPUS=1", IMAGE, "true"
        ],
        "radium run --gpus 1 -- --rm IMG true": [
            RADIUM_CLI, "run", "--gpus", "1", "--", "--rm", "--network", "none", IMAGE, "true"
        ],
    }  # fmt: skip
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for argv in variants.values():
        timed(argv, env)  # warm up: page cache, the agent started on demand
    for _ in range(runs):
        for name, argv in variants.items():
            samples[name].append(timed(argv, env))
    base = samples["docker run --rm IMG true (runc)"]
    print(f"radium run vs docker run, a short container ({runs} alternating runs)")
    for name, values in samples.items():
        print(line(name, values, None if values is base else base))


def pulls(site: object, client: Dockerd, reps: int) -> None:
    from integration.site import Site

    assert isinstance(site, Site)
    ref = f"localhost:{site.port}/radium-bench/bookworm:1"
    client.docker("tag", IMAGE, ref)
    client.docker("push", ref, timeout=600)
    one = site.dockerds["wf-acc-a"]
    ours, theirs = [], []
    for _ in range(reps):
        site.radium("images", "rm", ref)
        started = time.perf_counter()
        added = site.radium("images", "add", ref)
        ours.append(time.perf_counter() - started)
        if added.returncode != 0:
            raise SystemExit(f"radium images add failed:\n{added.stdout}{added.stderr}")
        site.radium("images", "rm", ref)
        started = time.perf_counter()
        one.docker("pull", ref, timeout=600)
        theirs.append(time.perf_counter() - started)
        one.docker("rmi", ref, check=False)
    size = client.docker("image", "inspect", "-f", "{{.Size}}", ref).stdout.strip()
    print(f"radium images add (2 acceptors) vs docker pull (1), {int(size) >> 20} MiB, {reps} runs")
    print(line("docker pull on one acceptor's dockerd", theirs))
    print(line("radium images add to two acceptors", ours, theirs))


if __name__ == "__main__":
    sys.exit(main())
