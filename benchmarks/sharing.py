"""Team sharing on the Alibaba GPU-sharing trace: the pool against static whole-GPU allocation.

A time-driven replay (benchmarks/simulation.py) through the pool's own ``PoolState`` and
``WaitingRoom``, not a copy. Arrivals: the GPU pods of a pod list that ran (CPU-only pods,
which no lease is, and the Pending ones, which never ran, are left out) at their
``creation_time`` (divided by ``--speedup``), each running ``deletion_time - scheduled_time``
seconds once placed. Each pod goes to one of ``--teams`` teams at random (by seed); LS pods
ask as ``inference``, Burstable and Guaranteed ones as ``build`` (neither preemptible), BE
ones (and any without a QoS) as ``train`` (``--preemptible``: all as ``train``).

Cluster: the list's pods are a sample that never loads the trace's whole cluster (at most
~66 of its 6,212 GPUs are asked for at once), so each of ``--nodes`` sizes is a run: N of the
trace's GPU nodes spread evenly over its mix of sizes and models, or ``all``.

- radium: one pool; each team a queue deserving capacity / teams GPUs, weight 1, borrowing
  idle GPUs; pods ask for their fraction of a GPU (or whole GPUs); the pool places them
  (``--policy``, fgd by default), serves waiters in its order and reclaims for a queue owed
  its share. A preempted pod's lease ends ``--grace`` seconds later; the pod then asks again
  for the run time it had left (as if it checkpointed at the notice), at the back.
- static: the nodes dealt to the teams, so each gets about its quota of GPUs; a pod takes
  ceil(its GPUs) whole GPUs of its team's nodes, first come first served per team, never
  borrowing, never preempted (the same pool code and policy, one pool per team).

Printed per size and mode (means over seeds; percentiles over all seeds' samples): GPU-busy
share, the GPU-seconds used by running pods (their fractions, not the whole GPUs a static
pod holds) over capacity x the arrival window (first to last arrival), against ``offered``,
what it would be if every pod ran as it arrived; GPUs held; queueing delay (arrival to first
placement); preemptions; the owed wait (reclaim latency): from when a team's first waiting
request would fit in the team's deserved share (static: its partition) until it is placed;
the wall time of one allocate call and of one serving pass (grants and reclaims after an
event). Pods that a mode could never place (tried on the empty cluster, e.g. 8 GPUs when a
team's partition has no 8-GPU node) are left out of both modes.

    .venv/bin/python -m benchmarks.sharing [--seeds 3] [--nodes 6,12,24,all] [--list default]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import random
import statistics
import sys
import time

from benchmarks import trace
from benchmarks.simulation import Job, Metrics, Simulation
from radium.errors import RadiumError
from radium.pool.core.policies import POLICIES
from radium.pool.core.queues import Queues
from radium.pool.core.state import PoolState
from radium.pool.model import AcceptorState, Queue, Request

#: Cluster sizes, in GPU nodes: loaded by the trace's arrivals, and the whole cluster.
NODES = "6,12,24,all"
PRIORITY = {"LS": "inference", "Burstable": "build", "Guaranteed": "build", "BE": "train"}


@dataclasses.dataclass(frozen=True)
class Setup:
    pods: list[trace.Pod]
    nodes: list[str]
    teams: int
    policy: str
    grace: float
    speedup: float
    seed: int
    #: Every pod asks as ``train`` (preemptible, may borrow), whatever its QoS.
    preemptible: bool = False


@dataclasses.dataclass
class Result:
    radium: Metrics
    static: Metrics
    #: Pods one of the modes could never place, left out of both.
    left_out: int
    #: The GPU-busy share if every pod ran as it arrived.
    offered: float


def cell(names: list[str], policy: str, teams: int = 0) -> PoolState:
    """A fresh pool of these trace nodes; with ``teams`` queues sharing its capacity."""
    wanted = set(names)
    state = trace.pool_of([a for a in trace.nodes() if a.name in wanted], policy)
    if teams:
        deserved = state.capacity() / teams
        state.set_queues(Queues(Queue(f"team{t}", deserved=deserved) for t in range(teams)))
    return state


def partition(acceptors: list[AcceptorState], teams: int) -> list[list[str]]:
    """Nodes dealt to teams, largest first, each to the team with the fewest GPUs so far."""
    parts: list[list[str]] = [[] for _ in range(teams)]
    gpus = [0] * teams
    for acceptor in sorted(acceptors, key=lambda a: (-len(a.devices), a.name)):
        team = gpus.index(min(gpus))
        parts[team].append(acceptor.name)
        gpus[team] += len(acceptor.devices)
    return parts


def subset(acceptors: list[AcceptorState], count: int) -> list[str]:
    """``count`` nodes spread evenly over the list by size and model: the cluster's mix."""
    ordered = sorted(
        acceptors, key=lambda a: (-len(a.devices), a.devices["0"].device.model, a.name)
    )
    return [ordered[int((i + 0.5) * len(ordered) / count)].name for i in range(count)]


def placeable(state: PoolState, request: Request) -> bool:
    """Whether the pool places it when empty (so it will, once enough has ended)."""
    try:
        lease = state.allocate(request, 0.0)
    except RadiumError:
        return False
    state.release(lease.id, 0.0)
    return True


def requests(pod: trace.Pod, team: int, name: str, preemptible: bool) -> tuple[Request, Request]:
    """The pod's request in the pool (its fraction, in its team's queue), and in static mode."""
    priority = "train" if preemptible else PRIORITY.get(pod.qos, "train")
    shared = dataclasses.replace(pod.request(), queue=f"team{team}", priority=priority, holder=name)
    whole = Request(
        gpus=math.ceil(pod.gpu_share),
        cpu_milli=pod.cpu_milli,
        selector=shared.selector,
        priority="build",
        holder=name,
    )
    return shared, whole


def run(setup: Setup) -> Result:
    rng = random.Random(setup.seed)
    pool = cell(setup.nodes, setup.policy, setup.teams)
    parts = partition(list(pool.acceptors.values()), setup.teams)
    probe = cell(setup.nodes, setup.policy, setup.teams)
    probes = [cell(part, setup.policy) for part in parts]
    start = min(pod.created for pod in setup.pods)
    shared_jobs: list[Job] = []
    whole_jobs: list[Job] = []
    for i, pod in enumerate(setup.pods):
        team = rng.randrange(setup.teams)
        name = f"{i}:{pod.name}"
        shared, whole = requests(pod, team, name, setup.preemptible)
        if placeable(probe, shared) and placeable(probes[team], whole):
            arrival = (pod.created - start) / setup.speedup
            shared_jobs.append(Job(name, 0, shared, pod.gpu_share, arrival, pod.lifetime))
            whole_jobs.append(Job(name, team, whole, pod.gpu_share, arrival, pod.lifetime))
    window = max(job.arrival for job in shared_jobs)
    offered = sum(
        j.share * max(0.0, min(window, j.arrival + j.remaining) - j.arrival) for j in shared_jobs
    ) / (pool.capacity() * window)
    radium = Simulation([pool], setup.grace, window).run(shared_jobs)
    static = Simulation([cell(part, setup.policy) for part in parts], setup.grace, window)
    return Result(radium, static.run(whole_jobs), len(setup.pods) - len(shared_jobs), offered)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def span(value: float) -> str:
    if math.isnan(value):
        return "—"
    if value >= 3600:
        return f"{value / 3600:.1f} h"
    return f"{value:.0f} s" if value >= 10 else f"{value:.1f} s"


def ms(values: list[float], q: float) -> str:
    return "—" if not values else f"{percentile(values, q) * 1e3:.2f} ms"


def mode_row(size: str, mode: str, runs: list[Metrics]) -> str:
    delays = [d for x in runs for d in x.delays]
    owed = [w for x in runs for w in x.owed_waits]
    busy = statistics.mean(x.busy_share for x in runs)
    held = statistics.mean(x.held_share for x in runs)
    waited = sum(1 for d in delays if d > 0) / len(delays)
    preempted = f"{sum(x.preemptions for x in runs)} ({sum(x.preempted_pods for x in runs)})"
    return (
        f"| {size} | {mode} | {100 * busy:.2f} % | {100 * held:.2f} % | {100 * busy / held:.0f} % |"
        f" {span(percentile(delays, 0.5))} | {span(percentile(delays, 0.99))} |"
        f" {span(statistics.mean(delays))} | {100 * waited:.1f} % | {preempted} |"
        f" {span(percentile(owed, 0.5))} | {span(percentile(owed, 0.99))} | {len(owed)} |"
        f" {statistics.mean(x.makespan for x in runs) / 86400:.0f} d |"
    )


def tables(sizes: list[tuple[str, list[Result]]]) -> None:
    print(
        "\n| GPUs (nodes) | mode | GPU-busy share | GPUs held | busy / held | delay p50 | p99 |"
        " mean | pods that waited | preemptions (pods) | owed wait p50 | p99 | owed waits |"
        " makespan |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for size, results in sizes:
        print(mode_row(size, "radium", [r.radium for r in results]))
        print(mode_row(size, "static", [r.static for r in results]))
    print("\n| GPUs (nodes) | offered | GPU-busy radium / static | pods left out |")
    print("|---|---|---|---|")
    for size, results in sizes:
        ratio = statistics.mean(r.radium.busy_share / r.static.busy_share for r in results)
        offered = statistics.mean(r.offered for r in results)
        left = statistics.mean(r.left_out for r in results)
        print(f"| {size} | {100 * offered:.2f} % | {ratio:.2f}x | {left:.1f} |")
    print("\n| GPUs (nodes) | mode | allocate p50 | p99 | serve pass p50 | p99 | calls | passes |")
    print("|---|---|---|---|---|---|---|---|")
    for size, results in sizes:
        for mode in ("radium", "static"):
            runs = [getattr(r, mode) for r in results]
            alloc = [s for x in runs for s in x.allocate_s]
            passes = [s for x in runs for s in x.serve_s]
            print(
                f"| {size} | {mode} | {ms(alloc, 0.5)} | {ms(alloc, 0.99)} | {ms(passes, 0.5)} |"
                f" {ms(passes, 0.99)} | {len(alloc)} | {len(passes)} |"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--teams", type=int, default=4)
    parser.add_argument("--list", default="default", help="pod list (openb_pod_list_NAME.csv)")
    parser.add_argument("--grace", type=float, default=30.0, help="preemption grace, seconds")
    parser.add_argument("--nodes", default=NODES, help="cluster sizes in GPU nodes, or 'all'")
    parser.add_argument("--speedup", type=float, default=1.0, help="arrivals this much faster")
    parser.add_argument("--pods", type=int, default=0, help="the first N pods only (0: all)")
    parser.add_argument("--policy", default="fgd", choices=sorted(POLICIES))
    parser.add_argument("--preemptible", action="store_true", help="all pods ask as train")
    args = parser.parse_args(argv)
    pods = sorted((p for p in trace.pods(args.list) if p.gpus and p.phase != "Pending"),
                  key=lambda p: p.created)  # fmt: skip
    pods = pods[: args.pods] if args.pods else pods
    every = trace.nodes()
    print(
        f"\n## Team sharing: {args.list}, {len(pods)} GPU pods, {args.teams} teams,"
        f" grace {args.grace:g} s, speedup {args.speedup:g}, {args.policy}, {args.seeds} seeds"
        + (", all preemptible" if args.preemptible else "")
    )
    began = time.perf_counter()
    sizes = []
    for size in args.nodes.split(","):
        names = [a.name for a in every] if size == "all" else subset(every, int(size))
        gpus = sum(len(a.devices) for a in every if a.name in set(names))
        results = [
            run(Setup(pods, names, args.teams, args.policy, args.grace, args.speedup, seed,
                      args.preemptible))
            for seed in range(args.seeds)
        ]  # fmt: skip
        sizes.append((f"{gpus} ({len(names)})", results))
    tables(sizes)
    print(f"\nWall time: {time.perf_counter() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
