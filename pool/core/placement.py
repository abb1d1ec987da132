"""Where a request goes: an index of acceptors by shape, scored by a placement policy.

Pure: no I/O, no clock. Acceptors in the same state are interchangeable for placement, so they
are grouped by *shape* (their labels, free CPU, and each device's kind and free memory); a
shape without its CPU is a *config*. Shapes, configs, device kinds and demands are interned as
small integers because a tuple's hash is recomputed on every lookup. Each kind of request keeps
its scores of shapes, and the choice among them is :mod:`radium.pool.core.choice`'s.
"""

from __future__ import annotations

from typing import Protocol

from radium.pool.core.choice import Score, choose, rescore
from radium.pool.core.demand import (
    Demand,
    Found,
    Interner,
    Kind,
    Option,
    Ranking,
    Selector,
    Slots,
    demand_of,
    kind_matches,
    kind_of,
    named,
    need_mib,
    options,
    placement,
    taken,
)
from radium.pool.core.free import FreeSummary
from radium.pool.model import AcceptorState, DeviceState, Placement, Request

__all__ = ["Config", "Placer", "Policy", "Shape"]

#: (acceptor labels id, free CPU in thousandths of a core or -1, device slots).
Shape = tuple[int, int, Slots]
#: (acceptor labels id, device slots): a shape without its CPU.
Config = tuple[int, Slots]


class Policy(Protocol):
    """Scores placing a demand on shapes; lower is better."""

    name: str

    @property
    def epoch(self) -> int:
        """Changes when earlier scores are no longer valid (the workload it learned did)."""
        ...

    def observe(self, demand: Demand) -> None: ...

    def scores(
        self, placer: Placer, sids: list[int], part: int, demand: Demand
    ) -> list[Found | None]:
        """The best option on each shape and its score, or None where the demand does not
        fit (CPU included). ``part`` interns the demand without its CPU, which with a
        shape's config decides the options."""
        ...

    def reset(self) -> None:
        """Forget what was keyed by the placer's config ids: it renumbered them."""
        ...


class Placer:
    """The acceptors that can take leases, indexed by shape, placed on by one policy."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.kinds: Interner[Kind] = Interner()
        self.labels: Interner[Selector] = Interner()
        self.shapes: Interner[Shape] = Interner()
        self.configs: Interner[Config] = Interner()
        self.demands: Interner[Demand] = Interner()
        #: a demand without its CPU: with the config, what decides the options
        self.parts: Interner[tuple[object, ...]] = Interner()
        self.acceptors: dict[str, AcceptorState] = {}
        #: shape id -> names of serving acceptors in that shape
        self.members: dict[int, set[str]] = {}
        self.shape_of: dict[str, int] = {}
        #: shape id -> config id
        self.config_of: list[int] = []
        #: shape id -> the first of its acceptors by name (ties go to it: reproducible)
        self.first: dict[int, str] = {}
        #: shape ids in the order they gained their first acceptor (again) or changed it
        self._joined: list[int] = []
        self._ranks: dict[int, Ranking] = {}
        #: (part, labels id) -> MiB the part needs on each device kind, or -1: no match
        self._needs: dict[tuple[int, int], list[int]] = {}
        self.free = FreeSummary(self)
        #: name -> (the acceptor, its labels id, its devices with their kind ids): the part of
        #: its shape that a lease never changes, while it is the same AcceptorState (a
        #: registration brings a new one)
        self._fixed: dict[str, tuple[AcceptorState, int, list[tuple[DeviceState, int]]]] = {}

    # -- the index ----------------------------------------------------------------------------

    def update(self, acceptor: AcceptorState) -> None:
        """Re-file an acceptor after its leases, CPU or liveness changed."""
        self.forget(acceptor.name)
        if not acceptor.serving:
            return
        self.acceptors[acceptor.name] = acceptor
        # Shapes, configs (after a placement too) and the log grow as acceptors move.
        if len(self.shapes.values) + len(self.configs.values) + len(self._joined) > (
            16 * len(self.acceptors) + 300_000
        ):
            self._compact()
        shape = self.shape(acceptor)
        sid = self.shapes(shape)
        if sid == len(self.config_of):
            self.config_of.append(self.configs((shape[0], shape[2])))
        self.shape_of[acceptor.name] = sid
        names = self.members.get(sid)
        if names is None:
            self.members[sid] = {acceptor.name}
            self.first[sid] = acceptor.name
            self._joined.append(sid)
        else:
            names.add(acceptor.name)
            if acceptor.name < self.first[sid]:
                self.first[sid] = acceptor.name
                self._joined.append(sid)
        self.free.moved(sid, +1)

    def forget(self, name: str) -> None:
        sid = self.shape_of.pop(name, None)
        self.acceptors.pop(name, None)
        if sid is not None:
            names = self.members[sid]
            names.discard(name)
            if not names:
                del self.members[sid], self.first[sid]
            elif name == self.first[sid]:
                self.first[sid] = min(names)
                self._joined.append(sid)
            self.free.moved(sid, -1)

    def _compact(self) -> None:
        """Forget shapes and configs no acceptor is in any more, and all scores (a long-lived
        pool sees endless ones)."""
        current = {sid: self.shapes.values[sid] for sid in self.members}
        self.shapes, self.configs, self.config_of = Interner(), Interner(), []
        self.members = {self.shapes(current[sid]): names for sid, names in self.members.items()}
        for labels_id, _, slots in self.shapes.values:
            self.config_of.append(self.configs((labels_id, slots)))
        self.shape_of = {n: sid for sid, names in self.members.items() for n in names}
        self.first = {sid: min(names) for sid, names in self.members.items()}
        self._joined = list(self.members)
        self._ranks.clear()
        self.policy.reset()
        self.free = FreeSummary(self)

    def shape(self, acceptor: AcceptorState) -> Shape:
        fixed = self._fixed.get(acceptor.name)
        if fixed is None or fixed[0] is not acceptor:
            labels = self.labels(tuple(sorted(acceptor.labels.items())))
            kinds = [(s, self.kinds(kind_of(s.device))) for s in acceptor.devices.values()]
            fixed = self._fixed[acceptor.name] = (acceptor, labels, kinds)
        slots = sorted([(kind, state.free_mib) for state, kind in fixed[2]])
        return (fixed[1], acceptor.cpu_free, tuple(slots))

    def kind(self, kind_id: int) -> Kind:
        return self.kinds.values[kind_id]

    # -- deciding -----------------------------------------------------------------------------

    def place(self, request: Request) -> Placement | None:
        demand = demand_of(request)
        self.policy.observe(demand)
        part = self.parts(demand[:3] + demand[4:])
        only = named(request)
        if only is not None:
            return self._place_named(demand, part, only)
        did, epoch, first = self.demands(demand), self.policy.epoch, self.first
        rank = self._ranks.get(did)
        if rank is None:  # a new kind of request: every shape there is
            rank = self._ranks[did] = Ranking(len(self._joined), epoch)
            fresh = set(first)
        else:  # the shapes that appeared since it last came and are still there
            fresh = first.keys() & self._joined[rank.seen :]
            rank.seen = len(self._joined)
        chosen = choose(rank, fresh, first, epoch, self._scorer(part, demand))
        if chosen is None:
            return None
        # Equal scores go to the first acceptor by name, so placement is reproducible.
        return self._placement(chosen[1], rank.memo[chosen[2]], demand)

    def _place_named(self, demand: Demand, part: int, only: set[str]) -> Placement | None:
        """A request naming its acceptors: score just their shapes, afresh."""
        memo = (rank := Ranking(0, 0)).memo
        sids = list({self.shape_of[n] for n in only if n in self.shape_of})
        rescore(rank, sids, self._scorer(part, demand))
        scored = [(f[0], n) for n in only if (f := memo.get(self.shape_of.get(n, -1)))]
        if not scored:
            return None
        name = min(scored)[1]
        return self._placement(name, memo[self.shape_of[name]], demand)

    def _scorer(self, part: int, demand: Demand) -> Score:
        """Scores shapes by the policy for this demand (of this part)."""
        return lambda sids: self.policy.scores(self, sids, part, demand)

    def free_summary(self, request: Request) -> tuple[int, int, int]:
        """(matching devices, wholly free ones, most MiB free on one) on serving acceptors."""
        return self.free.summary(demand_of(request), named(request))

    # -- for policies -------------------------------------------------------------------------

    def needs(self, part: int, labels_id: int, demand: Demand) -> list[int]:
        """MiB the demand (of this part) takes on each device kind, on acceptors with these
        labels, or -1 where its selector does not match."""
        found = self._needs.get((part, labels_id))
        if found is None or len(found) != len(self.kinds.values):
            labels = dict(self.labels.values[labels_id])
            found = self._needs[(part, labels_id)] = [
                need_mib(demand, kind[2])
                if kind_matches(kind, labels, demand[4], demand[5])
                else -1
                for kind in self.kinds.values
            ]
        return found

    def options(self, config: Config, part: int, demand: Demand) -> list[Option]:
        """The distinct ways a shape of this config can take the demand, CPU aside."""
        if not (demand[0] or demand[1] or demand[2]):
            return [()]  # CPU only: the placer can place it, though no lease asks this
        return options(config[1], self.needs(part, config[0], demand), demand[0])

    def after(self, config: Config, option: Option, part: int, demand: Demand) -> int:
        """The config id once the option is taken."""
        needs = self.needs(part, config[0], demand)
        return self.configs((config[0], taken(config[1], option, needs)))

    def _placement(self, name: str, found: Found | None, demand: Demand) -> Placement:
        assert found is not None
        kinds = self.kinds.values
        return placement(
            self.acceptors[name],
            self.shapes.values[self.shape_of[name]][2],
            found[1],
            kinds,
            demand,
        )
