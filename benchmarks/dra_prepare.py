"""What preparing a DRA claim costs, beside the lease it takes, measured side by side in one run.

Alternates, on one node agent, a local SQLite pool and one CPU acceptor:

  agent acquire   the node agent takes a one-GPU lease (what a container's start does)
  claim prepare   kubelet's NodePrepareResources for a one-device claim, through the
                  `radium dra serve` process: the claim read from the API server (a local
                  stand-in), the same lease through the agent, the CDI spec written

and prints median and p90 of each and the ratio; the release and the unprepare run off the
clock. The goal: under one second per claim, lease included.

    sudo .venv/bin/python -m benchmarks.dra_prepare [--runs 20]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

from benchmarks.container_start import percentile
from integration.dra_node import NODE, ApiServer, Node
from integration.pool import PoolCluster
from integration.radium_env import make_env
from integration.test_leases import stop_agent
from radium import agentclient
from radium import config as config_module
from tests.dra.kubelet import Kubelet


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
    api = ApiServer()
    threading.Thread(target=api.serve_forever, daemon=True).start()
    node = Node(radium.root, config, api, Kubelet(radium.root / "registry" / "radium.io-reg.sock"))
    try:
        cluster.start_pool()
        cluster.start_acceptor("bench-acc", devices=4)
        cluster.wait_up("bench-acc")
        node.start_plugin()
        node.kubelet.register()
        os.environ["RADIUM_CONFIG"] = str(config)  # the agent it autostarts reads it too
        loaded = config_module.load(config)
        claims = [api.add(name=f"c{i}") for i in range(args.runs + 1)]
        one = {"radium.io/gpus": "1"}

        def acquire(i: int) -> None:
            assert agentclient.acquire(loaded, f"bench-{i}", 0, one, "") is not None

        def prepare(i: int) -> None:
            answer = node.kubelet.prepare(claims[i])[claims[i].uid]
            assert answer.error == "", answer.error

        samples: dict[str, list[float]] = {"agent acquire": [], "claim prepare": []}
        acquire(args.runs)  # warm: the agent autostarts, connections open
        agentclient.release(loaded, f"bench-{args.runs}")
        prepare(args.runs)
        node.kubelet.unprepare(claims[args.runs])
        variants: list[tuple[str, Callable[[int], None], Callable[[int], None]]] = [
            ("agent acquire", acquire, lambda i: agentclient.release(loaded, f"bench-{i}")),
            ("claim prepare", prepare, lambda i: node.kubelet.unprepare(claims[i])),
        ]
        for i in range(args.runs):
            for name, start, stop in variants:
                began = time.perf_counter()
                start(i)
                samples[name].append((time.perf_counter() - began) * 1000)
                stop(i)
        base = statistics.median(samples["agent acquire"])
        print(f"DRA claim prepare, one whole device, {args.runs} runs each, alternating")
        print(f"  {'variant':<14} {'median ms':>10} {'p90 ms':>8} {'ratio':>6}")
        for name, values in samples.items():
            median = statistics.median(values)
            print(f"  {name:<14} {median:>10.1f} {percentile(values, 0.9):>8.1f} "
                  f"{median / base:>6.2f}")  # fmt: skip
    finally:
        node.stop_plugin()
        api.shutdown()
        api.server_close()
        stop_agent(config)
        cluster.stop()
        shutil.rmtree(radium.root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
