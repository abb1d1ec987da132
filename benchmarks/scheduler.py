"""The pool's scheduler on the Alibaba GPU-sharing trace: how well it packs, and what it costs.

Drives the pool's own ``PoolState`` (placement index, policies, store in memory), not a copy.

Fragmentation (the method of Weng et al., USENIX ATC '23, "Beware of Fragmentation"): the
trace's 1,523 nodes (1,213 with 6,212 GPUs); its pods, shuffled by seed and then drawn again
at random once the list runs out, arrive one at a time with no departures until the GPUs they
asked for reach 130 % of the cluster's; a pod that fits nowhere is skipped. Printed per pod
list and policy, mean over the seeds: the share of GPU capacity allocated when 100 % has
arrived, the share left unallocated at 130 %, and the cost of one decision. CPU-only pods
(which no Radium lease is) take their CPU through the same placer, as in the paper's
simulator.

    .venv/bin/python -m benchmarks.scheduler [--seeds 10] [--lists default,gpushare40,...]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Iterator

from benchmarks import trace
from radium.errors import CapacityError
from radium.pool.core.policies import POLICIES
from radium.pool.core.state import PoolState

#: Published means on openb_pod_list_default.csv (allocated at 100 %, unallocated at 130 %).
PUBLISHED = {"fgd": (95.23, 4.61), "bestfit": (92.86, 6.92), "packing": (91.78, None),
             "random": (86.30, None)}  # fmt: skip
#: The paper's cluster: 1,213 GPU nodes (6,212 GPUs) and 310 CPU-only ones for CPU-only pods.
NODES = "openb_node_list_all_node.csv"
FAMILIES = ("default", "gpushare40", "gpushare100", "multigpu50", "gpuspec33", "cpu250")


@dataclass
class Result:
    allocated_at_100: float
    unallocated_at_130: float
    decisions: list[float]


def fresh_state(policy: str) -> PoolState:
    return trace.pool_of(trace.nodes(NODES), policy)


def arrivals(pods: list[trace.Pod], seed: int) -> Iterator[trace.Pod]:
    rng = random.Random(seed)
    order = list(pods)
    rng.shuffle(order)
    yield from order
    while True:
        yield rng.choice(pods)


def inflate(pods: list[trace.Pod], policy: str, seed: int) -> Result:
    state = fresh_state(policy)
    capacity = sum(len(a.devices) for a in state.acceptors.values())
    arrived = allocated = 0.0
    at_100 = None
    decisions: list[float] = []
    for pod in arrivals(pods, seed):
        request = pod.request()
        began = time.perf_counter()
        if pod.gpus == 0:
            placement = state.placer.place(request)
            if placement is not None:
                acceptor = state.acceptors[placement.acceptor]
                acceptor.cpu_used += pod.cpu_milli
                state.placer.update(acceptor)
        else:
            try:
                state.allocate(request, 0.0)
            except CapacityError:
                pass
            else:
                allocated += pod.gpu_share
        decisions.append(time.perf_counter() - began)
        arrived += pod.gpu_share
        if at_100 is None and arrived >= capacity:
            at_100 = allocated / capacity
        if arrived >= 1.3 * capacity:
            assert at_100 is not None
            return Result(100 * at_100, 100 * (1 - allocated / capacity), decisions)
    raise AssertionError("unreachable: arrivals never end")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def fragmentation_table(lists: list[str], policies: list[str], seeds: int) -> None:
    print(f"\n## Fragmentation: {seeds} seeds, arrivals to 130 % of GPU capacity, no departures")
    print(
        "\n| pod list | policy | allocated at 100 % | unallocated at 130 % |"
        " decision p50 | p99 | published (alloc / unalloc) |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in lists:
        pods = trace.pods(name)
        for policy in policies:
            results = [inflate(pods, policy, seed) for seed in range(seeds)]
            alloc = statistics.mean(r.allocated_at_100 for r in results)
            unalloc = statistics.mean(r.unallocated_at_130 for r in results)
            spread = (
                f" ± {statistics.stdev(r.allocated_at_100 for r in results):.2f}"
                if seeds > 1
                else ""
            )
            decisions = [d for r in results for d in r.decisions]
            published = ""
            if name == "default" and policy in PUBLISHED:
                a, u = PUBLISHED[policy]
                published = f"{a:.2f} % / {u:.2f} %" if u is not None else f"{a:.2f} % / —"
            print(
                f"| {name} | {policy} | {alloc:.2f} %{spread} | {unalloc:.2f} % |"
                f" {percentile(decisions, 0.5) * 1e3:.3f} ms |"
                f" {percentile(decisions, 0.99) * 1e3:.3f} ms | {published} |",
                flush=True,
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--lists", default=",".join(FAMILIES), help="pod lists, or 'all'")
    parser.add_argument("--policies", default=",".join(sorted(POLICIES)))
    args = parser.parse_args(argv)
    lists = trace.pod_lists() if args.lists == "all" else args.lists.split(",")
    trace.require(*lists)
    fragmentation_table(lists, args.policies.split(","), args.seeds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
