"""Where a request goes: an index of acceptors by shape, scored by a placement policy.

Pure: no I/O, no clock. Acceptors in the same state are interchangeable for placement, so they
are grouped by *shape* (their labels, free CPU, and each device's kind and free memory) and a
policy scores each shape once per kind of request. Scores are memoised, and a lease changes
the shape of one acceptor only, so a decision costs one pass over the distinct shapes plus the
scoring of the one or two that changed. Shapes, device kinds and demands are interned as small
integers because a tuple's hash is recomputed on every lookup.
"""

from __future__ import annotations

from typing import Protocol

from radium.pool.demand import Demand, Kind, demand_of, kind_matches, kind_of, named, need_mib
from radium.pool.model import AcceptorState, Placement, Request

#: (kind id, free MiB) of each device, sorted.
Slots = tuple[tuple[int, int], ...]
#: (acceptor labels id, free CPU in thousandths of a core or -1, device slots).
Shape = tuple[int, int, Slots]
#: Indices into a shape's slots that a placement takes.
Option = tuple[int, ...]


class Interner:
    """Hashable values <-> small integers, so hot lookups hash an int, not a tuple."""

    def __init__(self) -> None:
        self.ids: dict[object, int] = {}
        self.values: list[object] = []

    def __call__(self, value: object) -> int:
        found = self.ids.get(value)
        if found is None:
            found = self.ids[value] = len(self.values)
            self.values.append(value)
        return found


class Policy(Protocol):
    """Scores one way to place a demand on a shape; lower is better."""

    name: str

    @property
    def epoch(self) -> int:
        """Changes when earlier scores are no longer valid (the workload it learned did)."""
        ...

    def observe(self, demand: Demand) -> None: ...
    def score(self, placer: Placer, shape: Shape, option: Option, demand: Demand) -> float: ...


class Placer:
    """The acceptors that can take leases, indexed by shape, placed on by one policy."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.kinds = Interner()
        self.labels = Interner()
        self.shapes = Interner()
        self.demands = Interner()
        self.acceptors: dict[str, AcceptorState] = {}
        #: shape id -> names of serving acceptors in that shape
        self.members: dict[int, set[str]] = {}
        self.shape_of: dict[str, int] = {}
        #: demand id -> shape id -> (score, option), or None when it does not fit
        self._memo: dict[int, dict[int, tuple[float, Option] | None]] = {}
        #: demand id -> shape id -> (matching devices, wholly free ones, most MiB free on one)
        self._free: dict[int, dict[int, tuple[int, int, int]]] = {}
        self._epoch = policy.epoch

    # -- the index ----------------------------------------------------------------------------

    def update(self, acceptor: AcceptorState) -> None:
        """Re-file an acceptor after its leases, CPU or liveness changed."""
        self.forget(acceptor.name)
        if not acceptor.serving:
            return
        self.acceptors[acceptor.name] = acceptor
        if len(self.shapes.values) > 8 * len(self.acceptors) + 100_000:
            self._compact()
        sid = self.shapes(self.shape(acceptor))
        self.shape_of[acceptor.name] = sid
        self.members.setdefault(sid, set()).add(acceptor.name)

    def forget(self, name: str) -> None:
        sid = self.shape_of.pop(name, None)
        self.acceptors.pop(name, None)
        if sid is not None:
            names = self.members[sid]
            names.discard(name)
            if not names:
                del self.members[sid]

    def _compact(self) -> None:
        """Forget shapes no acceptor is in any more (a long-lived pool sees endless ones)."""
        current = {sid: self.shapes.values[sid] for sid in self.members}
        self.shapes = Interner()
        self.members = {self.shapes(current[sid]): names for sid, names in self.members.items()}
        self.shape_of = {n: sid for sid, names in self.members.items() for n in names}
        self._memo.clear()
        self._free.clear()

    def shape(self, acceptor: AcceptorState) -> Shape:
        slots = []
        for state in acceptor.devices.values():
            slots.append((self.kinds(kind_of(state.device)), state.free_mib))
        labels = self.labels(tuple(sorted(acceptor.labels.items())))
        return (labels, acceptor.cpu_free, tuple(sorted(slots)))

    def kind(self, kind_id: int) -> Kind:
        return self.kinds.values[kind_id]  # type: ignore[return-value]

    # -- deciding -----------------------------------------------------------------------------

    def place(self, request: Request) -> Placement | None:
        demand = demand_of(request)
        self.policy.observe(demand)
        if self.policy.epoch != self._epoch:
            self._memo.clear()
            self._epoch = self.policy.epoch
        memo = self._memo.setdefault(self.demands(demand), {})
        only = named(request)
        best: tuple[float, Option] | None = None
        tied: list[int] = []
        for sid, names in self.members.items():
            if only is not None and only.isdisjoint(names):
                continue
            if sid in memo:
                found = memo[sid]
            else:
                found = memo[sid] = self._best(sid, demand)
            if found is None:
                continue
            if best is None or found[0] < best[0]:
                best, tied = found, [sid]
            elif found[0] == best[0]:
                tied.append(sid)
        if best is None:
            return None
        # Interchangeable acceptors: the first by name, so placement is reproducible.
        candidates = (n for sid in tied for n in self.members[sid])
        name = min(n for n in candidates if only is None or n in only)
        return self._placement(self.acceptors[name], memo[self.shape_of[name]], demand)

    def free_summary(self, request: Request) -> tuple[int, int, int]:
        """(matching devices, wholly free ones, most MiB free on one) on serving acceptors."""
        demand = demand_of(request)
        memo = self._free.setdefault(self.demands(demand), {})
        only = named(request)
        matching = whole = best = 0
        for sid, names in self.members.items():
            if only is not None:
                names = names & only
                if not names:
                    continue
            found = memo.get(sid)
            if found is None:
                found = memo[sid] = self._free_on(self.shapes.values[sid], demand)  # type: ignore[arg-type]
            matching += found[0] * len(names)
            whole += found[1] * len(names)
            best = max(best, found[2])
        return matching, whole, best

    def _free_on(self, shape: Shape, demand: Demand) -> tuple[int, int, int]:
        labels = dict(self.labels.values[shape[0]])  # type: ignore[call-overload]
        matching = whole = best = 0
        for kind_id, free in shape[2]:
            kind = self.kind(kind_id)
            if kind_matches(kind, labels, demand[4], demand[5]):
                matching += 1
                whole += free == kind[2]
                best = max(best, free)
        return matching, whole, best

    def _best(self, sid: int, demand: Demand) -> tuple[float, Option] | None:
        shape: Shape = self.shapes.values[sid]  # type: ignore[assignment]
        best: tuple[float, Option] | None = None
        for option in self.options(shape, demand):
            score = self.policy.score(self, shape, option, demand)
            if best is None or score < best[0]:
                best = (score, option)
        return best

    def options(self, shape: Shape, demand: Demand) -> list[Option]:
        """The distinct ways this shape can take the demand."""
        labels_id, cpu_free, slots = shape
        gpus, _, _, cpu, min_memory, selector = demand
        if cpu and 0 <= cpu_free < cpu:
            return []
        if not (gpus or demand[1] or demand[2]):
            return [()]  # CPU only: the placer can place it, though no lease asks this
        labels = dict(self.labels.values[labels_id])  # type: ignore[call-overload]
        fits = []
        seen: set[tuple[int, int]] = set()
        for i, (kind_id, free) in enumerate(slots):
            kind = self.kind(kind_id)
            if not kind_matches(kind, labels, min_memory, selector):
                continue
            if free < need_mib(demand, kind[2]):
                continue
            if gpus:
                fits.append(i)
            elif (kind_id, free) not in seen:
                seen.add((kind_id, free))
                fits.append(i)
        if gpus:
            return [tuple(fits[:gpus])] if len(fits) >= gpus else []
        return [(i,) for i in fits]

    def after(self, shape: Shape, option: Option, demand: Demand) -> Shape:
        """The shape once the option is taken."""
        labels_id, cpu_free, slots = shape
        taken = list(slots)
        for i in option:
            kind_id, free = taken[i]
            taken[i] = (kind_id, free - need_mib(demand, self.kind(kind_id)[2]))
        cpu = cpu_free - demand[3] if cpu_free >= 0 else -1
        return (labels_id, cpu, tuple(sorted(taken)))

    def _placement(
        self, acceptor: AcceptorState, found: tuple[float, Option] | None, demand: Demand
    ) -> Placement:
        assert found is not None
        shape: Shape = self.shapes.values[self.shape_of[acceptor.name]]  # type: ignore[assignment]
        devices: dict[str, int] = {}
        for i in found[1]:
            kind_id, free = shape[2][i]
            for device_id in sorted(acceptor.devices):
                state = acceptor.devices[device_id]
                d = state.device
                kind = (d.vendor, d.model, d.memory_mib, tuple(sorted(d.labels.items())))
                if (
                    device_id not in devices
                    and state.free_mib == free
                    and kind == self.kind(kind_id)
                ):
                    devices[device_id] = need_mib(demand, d.memory_mib)
                    break
        if demand[0] or not devices:
            return Placement(acceptor.name, devices, 1.0 if devices else 0.0)
        ((device_id, mib),) = devices.items()
        return Placement(
            acceptor.name, devices, mib / acceptor.devices[device_id].device.memory_mib
        )
