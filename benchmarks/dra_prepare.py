"""What preparing a DRA claim costs, beside the lease it takes, measured side by side in one run.

Alternates, on one node agent, a local SQLite pool and one CPU acceptor:

  agent-acquire   the node agent takes a one-GPU lease (what a container's start does)
  claim-prepare   kubelet's NodePrepareResources for a one-device claim, through the
                  `radium dra serve` process: the claim read from the API server (a local
                  stand-in), the same lease through the agent, the CDI spec written

and prints median and p90 of each, the milliseconds added and the ratio; the release and the
unprepare run off the clock. The goal: under one second per claim, lease included.

    sudo .venv/bin/python -m benchmarks.dra_prepare [--runs 20]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from benchmarks.container_start import print_table
from integration.dra_node import NODE, Node, dra_node
from integration.pool import PoolCluster
from integration.radium_env import make_env
from radium import agentclient
from radium import config as config_module


def measure(node: Node, config: Path, runs: int) -> dict[str, list[float]]:
    """Samples (ms) of each variant, alternating; releases and unprepares off the clock."""
    os.environ["RADIUM_CONFIG"] = str(config)  # the agent it autostarts reads it too
    loaded = config_module.load(config)
    claims = [node.api.add(name=f"c{i}") for i in range(runs + 1)]
    one = {"radium.io/gpus": "1"}

    def acquire(i: int) -> None:
        assert agentclient.acquire(loaded, f"bench-{i}", 0, one, "") is not None

    def prepare(i: int) -> None:
        answer = node.kubelet.prepare(claims[i])[claims[i].uid]
        assert answer.error == "", answer.error

    variants: list[tuple[str, Callable[[int], None], Callable[[int], None]]] = [
        ("agent-acquire", acquire, lambda i: agentclient.release(loaded, f"bench-{i}")),
        ("claim-prepare", prepare, lambda i: node.kubelet.unprepare(claims[i])),
    ]
    for _, start, stop in variants:  # warm: the agent autostarts, connections open
        start(runs)
        stop(runs)
    samples: dict[str, list[float]] = {name: [] for name, _, _ in variants}
    for i in range(runs):
        for name, start, stop in variants:
            began = time.perf_counter()
            start(i)
            samples[name].append((time.perf_counter() - began) * 1000)
            stop(i)
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=20, help="runs of each (default 20)")
    args = parser.parse_args(argv)
    radium = make_env(Path(tempfile.mkdtemp(prefix="radium-bench-dra-")))
    (radium.root / "pool").mkdir()
    cluster = PoolCluster(radium.root / "pool")
    config = radium.client_config(
        "dra.toml", cluster.client_table(), radium.root / "agent", node=NODE
    )
    try:
        cluster.start_pool()
        cluster.start_acceptor("bench-acc", devices=4)
        cluster.wait_up("bench-acc")
        with dra_node(radium.root, config) as node:
            samples = measure(node, config, args.runs)
    finally:
        cluster.stop()
        shutil.rmtree(radium.root, ignore_errors=True)
    print(f"DRA claim prepare, one whole device, {args.runs} runs each, alternating")
    print_table("NodePrepareResources beside the agent's own lease", samples, "agent-acquire")
    return 0


if __name__ == "__main__":
    sys.exit(main())
