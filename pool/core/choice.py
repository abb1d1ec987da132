"""The choice among the shapes a kind of request was scored on: heaps of its scores, kept as
shapes come and go, and stale scores redone within a budget.

Pure: no I/O, no clock. A lease changes the shape of one acceptor, and a decision must cost
about that, not a pass over every shape (about a thousand at the Alibaba trace's size, at a
microsecond or more each). So each kind of request keeps its scores of shapes in a heap
(:class:`~radium.pool.core.demand.Ranking`): a decision scores the shapes that appeared since
that kind last came, and takes the top. When the policy's workload changes (its epoch) the
scores are not all redone at once, which cost milliseconds per kind of request: a stale score
is redone when it might beat the choice, and a few more per decision.
"""

from __future__ import annotations

from heapq import heapify, heappop, heappush
from typing import Callable, Mapping, Optional

from radium.pool.core.demand import Entry, Found, Ranking

__all__ = ["REFRESH", "RESCORE", "Score", "choose", "rescore"]

#: Stale scores redone per decision when they might beat the choice; past that the best is
#: taken as it stands (a bound on the work after the workload changes).
RESCORE = 64
#: Stale scores redone per decision besides, most promising first, so that a shape whose
#: score improved under the new workload surfaces too.
REFRESH = 8

#: Scores shapes by their ids under the policy: the best option on each and its score, or None
#: where the demand does not fit.
Score = Callable[[list[int]], list[Optional[Found]]]


def rescore(rank: Ranking, sids: list[int], score: Score) -> list[Found | None]:
    """Score shapes afresh (they join ``rank.current``)."""
    scored = score(sids) if sids else []
    rank.memo.update(zip(sids, scored))
    rank.current.update(sids)
    return scored


def choose(
    rank: Ranking, fresh: set[int], first: Mapping[int, str], epoch: int, score: Score
) -> Entry | None:
    """The best entry for this kind of request, or None when it fits nowhere.

    ``fresh``: the shapes that appeared since it last came; ``first``: shape id -> the first
    of its acceptors by name, for every shape with acceptors; ``epoch``: the policy's now.
    """
    if rank.epoch != epoch:  # the workload changed: every score is stale
        rank.stale += rank.fresh
        heapify(rank.stale)
        rank.fresh, rank.current, rank.epoch, rank.slack = [], set(), epoch, 0.0
    memo, current = rank.memo, rank.current
    rescore(rank, [sid for sid in fresh if sid not in memo], score)
    for sid in fresh:
        if (found := memo[sid]) is not None:
            heap = rank.fresh if sid in current else rank.stale
            heappush(heap, (found[0], first[sid], sid))
    if len(rank.fresh) + len(rank.stale) > 2 * len(first) + 64:
        _rebuild(rank, first)  # mostly shapes that are gone
    chosen = _redo_stale(rank, first, _top(rank.fresh, rank, first, True), score)
    top = _top(rank.stale, rank, first, False)
    if top is not None and (chosen is None or top < chosen):
        chosen = top  # out of budget: taken as it stands
    return chosen


def _redo_stale(
    rank: Ranking, first: Mapping[int, str], chosen: Entry | None, score: Score
) -> Entry | None:
    """The choice once stale scores are redone where they might beat ``chosen``.

    A stale score is redone when it might beat the choice: when it is better, or worse by less
    than rescoring has lowered a score in this epoch (a guess: within RESCORE). REFRESH more are
    redone, most promising first, whatever they look like.
    """
    memo, current = rank.memo, rank.current
    stale, budget, refresh = rank.stale, RESCORE, REFRESH
    while stale:
        wanted = chosen is None or stale[0][0] <= chosen[0] + rank.slack
        if not (wanted and budget) and not refresh:
            break
        old, name, sid = heappop(stale)
        found = memo.get(sid)
        if found is None or found[0] != old or sid in current or first.get(sid) != name:
            continue
        if wanted and budget:
            budget -= 1
        else:
            refresh -= 1
        (found,) = rescore(rank, [sid], score)
        if found is not None:
            heappush(rank.fresh, entry := (found[0], name, sid))
            rank.slack = max(rank.slack, old - found[0])
            if chosen is None or entry < chosen:
                chosen = entry
    return chosen


def _top(heap: list[Entry], rank: Ranking, first: Mapping[int, str], fresh: bool) -> Entry | None:
    """The first valid entry of a heap, the invalid ones before it dropped."""
    while heap:
        score, name, sid = heap[0]
        found = rank.memo.get(sid)
        valid = found and found[0] == score and (sid in rank.current) == fresh
        if valid and first.get(sid) == name:
            return heap[0]
        heappop(heap)
    return None


def _rebuild(rank: Ranking, first: Mapping[int, str]) -> None:
    """Both heaps made again from the shapes there are (the rest dropped)."""
    rank.fresh, rank.stale = [], []
    for sid, name in first.items():
        found = rank.memo.get(sid)
        if found is not None:
            heap = rank.fresh if sid in rank.current else rank.stale
            heap.append((found[0], name, sid))
    heapify(rank.fresh)
    heapify(rank.stale)
