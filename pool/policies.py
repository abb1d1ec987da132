"""Placement policies: best-fit, and fragmentation gradient descent (FGD).

FGD is from Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
Fragmentation Gradient Descent" (USENIX ATC '23). A device's free share is a *fragment* for a
kind of request when that request cannot use it: the acceptor cannot host the request at all
(CPU, count, model), or this device has less free than the request needs. An acceptor's
fragmentation is the expected fragment over the mix of requests the pool sees; FGD places each
request where that expectation grows least. The mix is learned online from the requests
themselves (the paper takes it from the whole trace in advance).
"""

from __future__ import annotations

from collections import Counter
from typing import Callable

from radium.pool.demand import Demand, kind_matches, need_mib
from radium.pool.placement import Option, Placer, Shape


class BestFit:
    """Whole GPUs on the acceptor whose matching free GPUs fit the count most tightly (big
    requests keep finding room); parts on the device whose free memory fits most tightly."""

    name = "bestfit"
    epoch = 0

    def observe(self, demand: Demand) -> None:
        pass

    def score(self, placer: Placer, shape: Shape, option: Option, demand: Demand) -> float:
        labels_id, _, slots = shape
        if demand[0]:
            labels = dict(placer.labels.values[labels_id])  # type: ignore[call-overload]
            whole = sum(
                1
                for kind_id, free in slots
                if free == placer.kind(kind_id)[2]
                and kind_matches(placer.kind(kind_id), labels, demand[4], demand[5])
            )
            return whole - demand[0]
        if not option:
            return shape[1] - demand[3]
        kind_id, free = slots[option[0]]
        return free - need_mib(demand, placer.kind(kind_id)[2])


class Workload:
    """The mix of demands the pool sees: counts, snapshotted as frequencies now and then.

    Snapshots come at 1, 2, 4, ... demands and then every ``refresh``; after each periodic
    one the counts are halved, so the mix follows what teams ask for lately. Demands rarer
    than ``floor`` of the total are left out, as the paper keeps only its typical pods.
    """

    def __init__(self, refresh: int = 1024, floor: float = 0.002) -> None:
        self.refresh = refresh
        self.floor = floor
        self.counts: Counter[Demand] = Counter()
        self.seen = 0
        self.epoch = 0
        self.mix: list[tuple[float, Demand]] = []

    def observe(self, demand: Demand) -> None:
        if not (demand[0] or demand[1] or demand[2]):
            return  # wanting no GPU, it makes every free GPU share alike a fragment
        self.counts[demand] += 1
        self.seen += 1
        if self.seen % self.refresh == 0:
            self._snapshot()
            for key in self.counts:
                self.counts[key] /= 2  # type: ignore[assignment]
        elif self.seen < self.refresh and self.seen & (self.seen - 1) == 0:
            self._snapshot()

    def _snapshot(self) -> None:
        total = sum(self.counts.values())
        kept = [(n / total, d) for d, n in self.counts.most_common() if n / total >= self.floor]
        norm = sum(p for p, _ in kept)
        self.mix = [(p / norm, d) for p, d in kept]
        self.epoch += 1


class FGD:
    """Place where the expected fragmentation over the learned workload grows least."""

    name = "fgd"

    def __init__(self, workload: Workload | None = None) -> None:
        self.workload = workload or Workload()
        self._frag: dict[Shape, float] = {}
        self._needs: dict[int, list[tuple[float, int, int, list[int]]]] = {}
        self._frag_epoch = -1

    @property
    def epoch(self) -> int:
        return self.workload.epoch

    def observe(self, demand: Demand) -> None:
        self.workload.observe(demand)

    def score(self, placer: Placer, shape: Shape, option: Option, demand: Demand) -> float:
        after = placer.after(shape, option, demand)
        growth = self.fragmentation(placer, after) - self.fragmentation(placer, shape)
        if not option:
            return growth
        # Equal growth (common when the mix is narrow): the tightest fit, as best-fit would.
        kind_id, free = shape[2][option[0]]
        leftover = (free - need_mib(demand, placer.kind(kind_id)[2])) / placer.kind(kind_id)[2]
        return growth + leftover * 1e-6

    def fragmentation(self, placer: Placer, shape: Shape) -> float:
        if self._frag_epoch != self.workload.epoch:
            self._frag.clear()
            self._needs.clear()
            self._frag_epoch = self.workload.epoch
        found = self._frag.get(shape)
        if found is None:
            found = self._frag[shape] = self._fragmentation(placer, shape)
        return found

    def _fragmentation(self, placer: Placer, shape: Shape) -> float:
        """Expected GPU share (in GPUs) on this shape that the next request could not use."""
        labels_id, cpu_free, slots = shape
        shares = [free / placer.kind(kind_id)[2] for kind_id, free in slots]
        total = sum(shares)
        if total == 0:
            return 0.0
        expected = 0.0
        for p, gpus, cpu, needs in self._compiled(placer, labels_id):
            if cpu and 0 <= cpu_free < cpu:
                expected += p * total
                continue
            usable = 0.0
            fitting = 0
            for (kind_id, free), share in zip(slots, shares):
                need = needs[kind_id]
                if 0 <= need <= free:
                    usable += share
                    fitting += 1
            hostable = fitting >= gpus if gpus else fitting > 0
            expected += p * (total - usable if hostable else total)
        return expected

    def _compiled(self, placer: Placer, labels_id: int) -> list[tuple[float, int, int, list[int]]]:
        """The mix as (probability, GPUs, CPU, MiB needed per device kind or -1: no match)."""
        kinds = len(placer.kinds.values)
        found = self._needs.get(labels_id)
        if found is None or (found and len(found[0][3]) != kinds):
            labels = dict(placer.labels.values[labels_id])  # type: ignore[call-overload]
            found = self._needs[labels_id] = [
                (
                    p,
                    demand[0],
                    demand[3],
                    [
                        need_mib(demand, kind[2])
                        if kind_matches(kind, labels, demand[4], demand[5])
                        else -1
                        for kind in map(placer.kind, range(kinds))
                    ],
                )
                for p, demand in self.workload.mix
            ]
        return found


POLICIES: dict[str, Callable[[], BestFit | FGD]] = {"bestfit": BestFit, "fgd": FGD}
