"""What is free for a request that fits nowhere, to say why in its refusal: (matching devices,
wholly free ones, most MiB free on one), kept per selector as acceptors move between shapes."""

from __future__ import annotations

from collections import Counter
from typing import Protocol

from radium.pool.core.demand import Demand, Interner, Kind, Selector, Slots, kind_matches
from radium.pool.model import AcceptorState

__all__ = ["FreeSummary", "Shapes"]


class Shapes(Protocol):
    """What the summary reads of the placer (:class:`radium.pool.core.placement.Placer`)."""

    acceptors: dict[str, AcceptorState]
    #: shape id -> the acceptors in it; acceptor -> its shape id; shape id -> its config id
    members: dict[int, set[str]]
    shape_of: dict[str, int]
    config_of: list[int]
    #: config id -> (labels id, slots); labels id -> the labels
    configs: Interner[tuple[int, Slots]]
    labels: Interner[Selector]

    def kind(self, kind_id: int) -> Kind: ...


class Totals:
    """What is free for one (min memory, selector) over the serving acceptors."""

    __slots__ = ("best", "matching", "seen", "whole")

    def __init__(self, seen: int) -> None:
        self.matching = self.whole = 0
        #: most MiB free on one matching device -> acceptors with that (a max that can shrink)
        self.best: Counter[int] = Counter()
        #: how far into the summary's log of moves these count
        self.seen = seen

    def add(self, found: tuple[int, int, int], sign: int) -> None:
        self.matching += sign * found[0]
        self.whole += sign * found[1]
        self.best[found[2]] += sign
        if not self.best[found[2]]:
            del self.best[found[2]]


class FreeSummary:
    """(matching devices, wholly free ones, most MiB free on one) for a request that fits
    nowhere, to say why. Many requests fail in a row when the pool is full, so the totals are
    kept per selector from a log of acceptors moving between shapes, not summed afresh."""

    def __init__(self, placer: Shapes) -> None:
        self.placer = placer
        #: (shape id, +1 or -1) per acceptor entering or leaving a shape
        self._moves: list[tuple[int, int]] = []
        self._totals: dict[tuple[int, Selector], Totals] = {}
        #: (min memory, selector) -> config id -> (matching, wholly free, most MiB free)
        self._of: dict[tuple[int, Selector], dict[int, tuple[int, int, int]]] = {}

    def moved(self, sid: int, sign: int) -> None:
        if self._totals:
            self._moves.append((sid, sign))
            if len(self._moves) > 4 * len(self.placer.acceptors) + 4096:
                self._moves.clear()  # cheaper to sum afresh when next asked
                self._totals.clear()

    def summary(self, demand: Demand, only: set[str] | None) -> tuple[int, int, int]:
        placer, key = self.placer, (demand[4], demand[5])
        if only is not None:
            totals = Totals(0)
            for name in only & placer.shape_of.keys():
                totals.add(self._on(key, placer.shape_of[name]), +1)
            return totals.matching, totals.whole, max(totals.best, default=0)
        known = self._totals.get(key)
        if known is None:
            known = self._totals[key] = Totals(len(self._moves))
            for sid, names in placer.members.items():
                known.add(self._on(key, sid), len(names))
        for sid, sign in self._moves[known.seen :]:
            known.add(self._on(key, sid), sign)
        known.seen = len(self._moves)
        return known.matching, known.whole, max(known.best, default=0)

    def _on(self, key: tuple[int, Selector], sid: int) -> tuple[int, int, int]:
        cid = self.placer.config_of[sid]
        of = self._of.setdefault(key, {})
        found = of.get(cid)
        if found is None:
            labels_id, slots = self.placer.configs.values[cid]
            labels = dict(self.placer.labels.values[labels_id])
            matching = whole = best = 0
            for kind_id, free in slots:
                kind = self.placer.kind(kind_id)
                if kind_matches(kind, labels, key[0], key[1]):
                    matching += 1
                    whole += free == kind[2]
                    best = max(best, free)
            found = of[cid] = (matching, whole, best)
        return found
