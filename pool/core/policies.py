"""Placement policies: best-fit, here, and fragmentation gradient descent
(:mod:`radium.pool.core.fgd`, the default); :data:`POLICIES` names them for ``[pool] placement``.

Both keep what does not depend on CPU per (GPU part of a demand, config): the options and where
each leads.
"""

from __future__ import annotations

from typing import Callable

from radium.pool.core.demand import Demand, Found
from radium.pool.core.fgd import FGD
from radium.pool.core.placement import Placer

__all__ = ["POLICIES", "BestFit"]

#: Not in a cache (None is a value there: no fit).
_MISSING = object()


class BestFit:
    """Whole GPUs on the acceptor whose matching free GPUs fit the count most tightly (big
    requests keep finding room); parts on the device whose free memory fits most tightly."""

    name = "bestfit"
    epoch = 0

    def __init__(self) -> None:
        #: (part, config) -> best (score, option), or None: no option
        self._best: dict[tuple[int, int], Found | None] = {}

    def observe(self, demand: Demand) -> None:
        pass

    def reset(self) -> None:
        self._best.clear()

    def scores(
        self, placer: Placer, sids: list[int], part: int, demand: Demand
    ) -> list[Found | None]:
        shapes, cpu, scored = placer.shapes.values, demand[3], []
        for sid in sids:
            cpu_free = shapes[sid][1]
            found: Found | None = None
            if cpu and 0 <= cpu_free < cpu:
                pass
            elif not (demand[0] or demand[1] or demand[2]):
                found = (cpu_free - cpu, ())
            else:
                key = (part, placer.config_of[sid])
                found = self._best.get(key, _MISSING)  # type: ignore[arg-type]
                if found is _MISSING:
                    found = self._best[key] = self._best_on(placer, key[1], part, demand)
            scored.append(found)
        return scored

    def _best_on(self, placer: Placer, cid: int, part: int, demand: Demand) -> Found | None:
        config = placer.configs.values[cid]
        needs = placer.needs(part, config[0], demand)
        best: Found | None = None
        for option in placer.options(config, part, demand):
            if demand[0]:  # wholly free matching GPUs beyond the count
                score = sum(
                    1 for k, free in config[1] if needs[k] >= 0 and free == placer.kind(k)[2]
                )
                score -= demand[0]
            else:
                kind_id, free = config[1][option[0]]
                score = free - needs[kind_id]
            if best is None or score < best[0]:
                best = (score, option)
        return best


POLICIES: dict[str, Callable[[], BestFit | FGD]] = {"bestfit": BestFit, "fgd": FGD}
