"""Fragmentation gradient descent (FGD), the pool's default placement policy.

FGD is from Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
Fragmentation Gradient Descent" (USENIX ATC '23). A device's free share is a *fragment* for a
kind of request when that request cannot use it: the acceptor cannot host the request at all
(CPU, count, model), or this device has less free than the request needs. An acceptor's
fragmentation is the expected fragment over the mix of requests the pool sees; FGD places each
request where that expectation grows least. The mix is learned online from the requests
themselves (the paper takes it from the whole trace in advance).

It keeps what does not depend on CPU per (GPU part of a demand, config): the options and
where each leads. CPU only decides which requests of the mix an acceptor can
still host (a *bucket*), so FGD keeps fragmentation per (config, bucket), and per config the
fragment of each kind of request, which no mix changes.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from radium.pool.core.demand import (
    Demand,
    Found,
    Interner,
    Option,
    Workload,
    kind_matches,
    need_mib,
)
from radium.pool.core.placement import Placer

__all__ = ["FGD"]

#: Not in a cache (None is a value there: no fit).
_MISSING = object()


class FGD:
    """Place where the expected fragmentation over the learned workload grows least."""

    name = "fgd"

    def __init__(self, workload: Workload | None = None) -> None:
        self.workload = workload or Workload()
        #: (part, config) -> (config after, leftover share or None, option) of each option
        self._moves: dict[tuple[int, int], list[tuple[int, float | None, Option]]] = {}
        #: config -> (signature set it is complete for, signature -> fragment (GPUs) for
        #: requests of that signature and the total free share under -1); what no mix changes
        self._frags: dict[int, tuple[int, dict[int, float]]] = {}
        #: (GPUs, MiB needed per device kind or -1: no match): what a fragment depends on
        self._signatures: Interner[tuple[int, tuple[int, ...]]] = Interner()
        self._signature_sets: Interner[frozenset[int]] = Interner()
        self._epoch = -1
        #: The mix's CPU, ascending: an acceptor with ``u`` free can host (by CPU) the first
        #: ``bisect_right(self._cpus, u)`` of it, its *bucket*: all that CPU changes.
        self._cpus: list[int] = []
        self._width = 1
        #: rank by CPU of each request of the mix
        self._ranks: list[int] = []
        #: labels id -> (kinds compiled for, signature set, (p, rank by CPU, signature) in mix
        #: order)
        self._compiled: dict[int, tuple[int, int, list[tuple[float, int, int]]]] = {}
        #: config * (len(mix) + 1) + bucket -> expected fragment, for this epoch's mix: used
        #: in it, and worked out ahead (see _learn) but not used yet
        self._expected: dict[int, float] = {}
        self._ahead: dict[int, float] = {}
        #: part -> (config, bucket before, bucket after) as one int -> best, for this mix
        self._scores: dict[int, dict[int, Found | None]] = {}

    @property
    def epoch(self) -> int:
        return self.workload.epoch

    def observe(self, demand: Demand) -> None:
        self.workload.observe(demand)

    def reset(self) -> None:
        self._moves.clear()
        self._frags.clear()
        self._expected.clear()
        self._ahead.clear()
        self._scores.clear()

    def scores(
        self, placer: Placer, sids: list[int], part: int, demand: Demand
    ) -> list[Found | None]:
        if self._epoch != self.workload.epoch:
            self._learn(placer)
        shapes, config_of, cpus, width, cpu = (
            placer.shapes.values,
            placer.config_of,
            self._cpus,
            self._width,
            demand[3],
        )
        # Demands that differ in CPU alone, on shapes that differ in CPU alone, score alike
        # when the CPU free before and after is in the same buckets: a request that comes
        # rarely, after hundreds of shapes changed, finds many scored by its kin.
        scores = self._scores.setdefault(part, {})
        scored: list[Found | None] = []
        for sid in sids:
            cpu_free = shapes[sid][1]
            if cpu_free < 0:
                now = then = len(cpus)
            elif cpu_free < cpu:
                scored.append(None)
                continue
            else:
                now, then = bisect_right(cpus, cpu_free), bisect_right(cpus, cpu_free - cpu)
            cid = config_of[sid]
            key = (cid * width + now) * width + then
            found = scores.get(key, _MISSING)
            if found is _MISSING:
                found = scores[key] = self._best_on(placer, cid, part, demand, now, then)
            scored.append(found)  # type: ignore[arg-type]
        return scored

    def _best_on(
        self, placer: Placer, cid: int, part: int, demand: Demand, now: int, then: int
    ) -> Found | None:
        moves = self._moves.get((part, cid))
        if moves is None:
            moves = self._moves[(part, cid)] = self._moves_of(placer, cid, part, demand)
        if not moves:
            return None
        expected, width = self._expected, self._width
        before = expected.get(cid * width + now)
        if before is None:
            before = self._fragmentation(placer, cid, now)
        best: Found | None = None
        for after, leftover, option in moves:
            score = expected.get(after * width + then)
            if score is None:
                score = self._fragmentation(placer, after, then)
            score -= before
            if leftover is not None:
                # Equal growth (common when the mix is narrow): the tightest fit.
                score += leftover * 1e-6
            if best is None or score < best[0]:
                best = (score, option)
        return best

    def _moves_of(
        self, placer: Placer, cid: int, part: int, demand: Demand
    ) -> list[tuple[int, float | None, Option]]:
        config = placer.configs.values[cid]
        needs = placer.needs(part, config[0], demand)
        moves = []
        for option in placer.options(config, part, demand):
            leftover = None
            if option:
                kind_id, free = config[1][option[0]]
                memory = placer.kind(kind_id)[2]
                leftover = (free - needs[kind_id]) / memory
            moves.append((placer.after(config, option, part, demand), leftover, option))
        return moves

    def _learn(self, placer: Placer) -> None:
        """A new mix. The fragmentation used under the last one is redone for it at once,
        some milliseconds once per snapshot: left to the decisions that want it (redoing
        stale scores), it made more than 1 % of them take over a millisecond. Only what was
        used: what was worked out ahead and not used is not carried on."""
        wanted, cpus, width = list(self._expected), self._cpus, self._width
        self._epoch = self.workload.epoch
        mix = self.workload.mix
        self._cpus = sorted(demand[3] for _, demand in mix)
        self._width = len(self._cpus) + 1
        by_cpu = sorted(range(len(mix)), key=lambda i: mix[i][1][3])
        self._ranks = [0] * len(mix)
        for rank, i in enumerate(by_cpu):
            self._ranks[i] = rank
        self._compiled.clear()
        self._expected.clear()
        self._ahead.clear()
        self._scores.clear()
        if len(self._frags) > 100_000:
            self._frags.clear()
        for key in wanted:
            cid, bucket = divmod(key, width)
            if 0 < bucket < len(cpus):  # the same CPU free, in the new mix's buckets
                bucket = bisect_right(self._cpus, cpus[bucket - 1])
            elif bucket:
                bucket = len(self._cpus)
            self._fragmentation(placer, cid, bucket, ahead=True)

    def _fragmentation(self, placer: Placer, cid: int, bucket: int, ahead: bool = False) -> float:
        """Expected GPU share on this config that the next request could not use, with the
        first ``bucket`` of the mix by CPU hostable.

        Summed as one loop in mix order, as a whole shape's used to be: scores that are equal
        but for float rounding are common, and which wins must not change with the order of
        summing (another order, or rounding them to tie, lost 0.1 % to 2 % allocated)."""
        key = cid * self._width + bucket
        found = self._expected.get(key)
        if found is None and not ahead:
            found = self._ahead.pop(key, None)
            if found is not None:
                self._expected[key] = found
        if found is None:
            labels_id, slots = placer.configs.values[cid]
            signatures, mix = self._compiled_for(placer, labels_id)
            known = self._frags.get(cid)
            if known is None or known[0] != signatures:
                frags = self._fragments(placer, slots, signatures, known)
                known = self._frags[cid] = (signatures, frags)
            frags = known[1]
            total = frags[-1]
            found = 0.0
            if total:
                for p, rank, signature in mix:
                    found += p * (total if rank >= bucket else frags[signature])
            (self._ahead if ahead else self._expected)[key] = found
        return found

    def _fragments(
        self,
        placer: Placer,
        slots: tuple[tuple[int, int], ...],
        signatures: int,
        known: tuple[int, dict[int, float]] | None,
    ) -> dict[int, float]:
        """Signature -> GPU share on these devices that such a request could not use (all of
        it when they cannot host it); the total free share under -1."""
        shares = [free / placer.kind(kind_id)[2] for kind_id, free in slots]
        frags = known[1] if known else {}
        frags[-1] = total = sum(shares)
        kind_id = slots[0][0] if slots else -1
        frees = [free for k, free in slots if k == kind_id]
        if len(frees) < len(slots):
            frees = []  # several kinds: the devices with room are not a suffix of the slots
        #: first device with room -> share free on those from it on, summed in slot order
        suffixes: dict[int, float] = {}
        for signature in self._signature_sets.values[signatures]:
            if signature in frags:
                continue
            gpus, needs = self._signatures.values[signature]
            if frees:  # sorted by free: those with room for the need are a suffix
                need = needs[kind_id]
                start = bisect_left(frees, need) if need >= 0 else len(frees)
                fitting = len(frees) - start
                usable = suffixes.get(start)
                if usable is None:
                    usable = 0.0
                    for share in shares[start:]:
                        usable += share
                    suffixes[start] = usable
            else:
                usable, fitting = 0.0, 0
                for (kind, free), share in zip(slots, shares):
                    need = needs[kind]
                    if 0 <= need <= free:
                        usable += share
                        fitting += 1
            hostable = fitting >= gpus if gpus else fitting > 0
            frags[signature] = total - usable if hostable else total
        return frags

    def _compiled_for(
        self, placer: Placer, labels_id: int
    ) -> tuple[int, list[tuple[float, int, int]]]:
        """The mix, on acceptors with these labels: (p, rank by CPU, signature), and the id
        of its set of signatures (a fragment is kept per config and signature)."""
        kinds = len(placer.kinds.values)
        found = self._compiled.get(labels_id)
        if found is None or found[0] != kinds:
            labels = dict(placer.labels.values[labels_id])
            compiled = []
            for (p, demand), rank in zip(self.workload.mix, self._ranks):
                needs = tuple(
                    need_mib(demand, kind[2])
                    if kind_matches(kind, labels, demand[4], demand[5])
                    else -1
                    for kind in map(placer.kind, range(kinds))
                )
                compiled.append((p, rank, self._signatures((demand[0], needs))))
            signatures = self._signature_sets(frozenset(s for _, _, s in compiled))
            found = self._compiled[labels_id] = (kinds, signatures, compiled)
        return found[1], found[2]
