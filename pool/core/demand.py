"""What a request asks and what a device is, as small hashable values the placer compares:
demands, device kinds, whether a selector matches, the ways devices can take a demand; and what
the placer keeps per demand: the mix of demands the pool sees, and each kind of request's scores
of shapes. What is free for a request that fits nowhere is :mod:`radium.pool.core.free`'s."""

from __future__ import annotations

import math
from collections import Counter
from typing import Generic, Iterable, Mapping, TypeVar

from radium.pool.model import AcceptorState, Device, Placement, Request

__all__ = [
    "SHARED",
    "Demand",
    "Entry",
    "Found",
    "Interner",
    "Kind",
    "Option",
    "Ranking",
    "Selector",
    "Slots",
    "Workload",
    "demand_of",
    "kind_matches",
    "kind_of",
    "matches",
    "named",
    "need_mib",
    "options",
    "placement",
    "taken",
    "value_matches",
]

T = TypeVar("T")
#: (vendor, model, memory_mib, label items): what a selector can ask of a device.
Kind = tuple[str, str, int, tuple[tuple[str, str], ...]]
#: A selector's (key, value) items, sorted.
Selector = tuple[tuple[str, str], ...]
#: (kind id, free MiB) of each device of an acceptor, sorted.
Slots = tuple[tuple[int, int], ...]
#: Indices into an acceptor's slots that a placement takes.
Option = tuple[int, ...]
#: (score, option): the best way to place a demand on one shape; lower scores are better.
Found = tuple[float, Option]
#: (score, first acceptor name in the shape, shape id): ordered as placement prefers
Entry = tuple[float, str, int]
#: What a request asks, without who asks: (gpus, fraction, memory_mib, cpu_milli,
#: min_memory_mib, selector items without "acceptor").
Demand = tuple[int, float, int, int, int, Selector]


#: The selector item a demand for part of one GPU carries: a device labelled
#: ``sharing=exclusive`` (an NVIDIA GPU whose acceptor cannot run MPS, docs/gpus.md) takes
#: whole-GPU leases only. Not a label name (labels have no space), so no user selector has it.
SHARED = (" shared", "")
#: The device label that says how a GPU is shared, and the value that refuses fractions.
SHARING, EXCLUSIVE = "sharing", "exclusive"


def demand_of(request: Request) -> Demand:
    """What ``request`` asks, without who asks, as the placer compares it."""
    items = [(k, v) for k, v in request.selector.items() if k != "acceptor"]
    if not request.gpus and request.fraction < 1:
        items.append(SHARED)
    selector = tuple(sorted(items))
    return (
        request.gpus,
        request.fraction,
        request.memory_mib,
        request.cpu_milli,
        request.min_memory_mib,
        selector,
    )


def need_mib(demand: Demand, memory_mib: int) -> int:
    """MiB a demand takes on one device of this size (all of it for whole GPUs)."""
    gpus, fraction, memory, _, _, _ = demand
    if gpus:
        return memory_mib
    if memory:
        return memory
    # Rounded down, so that n leases of 1/n always fit one device (two halves of an odd
    # 81559 MiB H100 took 40780 each, one MiB more than it has); the epsilon keeps float
    # noise (0.47 * 16000 = 7519.999...) from costing a MiB.
    return max(1, math.floor(fraction * memory_mib + 1e-6))


def value_matches(wanted: str, have: str | None) -> bool:
    """A selector value may list alternatives: ``model=T4|A10``."""
    return have is not None and (have == wanted or ("|" in wanted and have in wanted.split("|")))


def kind_of(device: Device) -> Kind:
    """The device as a selector sees it: vendor, model, memory and labels."""
    return (device.vendor, device.model, device.memory_mib, tuple(sorted(device.labels.items())))


def matches(acceptor: AcceptorState, device: Device, request: Request) -> bool:
    """Whether a request may have this device of this acceptor (up or not)."""
    wanted = named(request)
    if wanted is not None and acceptor.name not in wanted:
        return False
    return kind_matches(
        kind_of(device), acceptor.labels, request.min_memory_mib, demand_of(request)[5]
    )


def kind_matches(
    kind: Kind, labels: Mapping[str, str], min_memory: int, selector: Iterable[tuple[str, str]]
) -> bool:
    """Whether a device of this kind, on an acceptor with these labels, fits the selector."""
    vendor, model, memory, device_labels = kind
    if memory < min_memory:
        return False
    for key, wanted in selector:
        if (key, wanted) == SHARED:
            if dict(device_labels).get(SHARING) == EXCLUSIVE:
                return False
            continue
        if key == "vendor":
            have: str | None = vendor
        elif key == "model":
            have = model
        else:
            have = dict(device_labels).get(key, labels.get(key))
        if not value_matches(wanted, have):
            return False
    return True


def named(request: Request) -> set[str] | None:
    """The acceptors a request names (``acceptor=a|b``), or None when it names none."""
    wanted = request.selector.get("acceptor")
    return set(wanted.split("|")) if wanted is not None else None


def options(slots: Slots, needs: list[int], gpus: int) -> list[Option]:
    """The distinct ways devices with these (kind id, free MiB) slots, sorted, can take a
    demand needing ``needs[kind id]`` MiB on one (-1: not that kind): ``gpus`` whole ones,
    or one device of each distinct (kind, free) with room."""
    fits = []
    seen: set[tuple[int, int]] = set()
    for i, (kind_id, free) in enumerate(slots):
        need = needs[kind_id]
        if need < 0 or free < need:
            continue
        if gpus:
            fits.append(i)
        elif (kind_id, free) not in seen:
            seen.add((kind_id, free))
            fits.append(i)
    if gpus:
        return [tuple(fits[:gpus])] if len(fits) >= gpus else []
    return [(i,) for i in fits]


def taken(slots: Slots, option: Option, needs: list[int]) -> Slots:
    """The slots once the devices of the option gave what the demand needs."""
    after = list(slots)
    for i in option:
        kind_id, free = after[i]
        after[i] = (kind_id, free - needs[kind_id])
    return tuple(sorted(after))


def placement(
    acceptor: AcceptorState, slots: Slots, option: Option, kinds: list[Kind], demand: Demand
) -> Placement:
    """The acceptor's devices in the slots of the option (the first by id of each kind and
    free memory), and what the demand takes on them."""
    devices: dict[str, int] = {}
    for i in option:
        kind_id, free = slots[i]
        for device_id in sorted(acceptor.devices):
            state = acceptor.devices[device_id]
            if (
                device_id not in devices
                and state.free_mib == free
                and kind_of(state.device) == kinds[kind_id]
            ):
                devices[device_id] = need_mib(demand, state.device.memory_mib)
                break
    if demand[0] or not devices:
        return Placement(acceptor.name, devices, 1.0 if devices else 0.0)
    ((device_id, mib),) = devices.items()
    if demand[1] and not demand[2]:  # the fraction asked for, not its memory rounded down
        return Placement(acceptor.name, devices, demand[1])
    return Placement(acceptor.name, devices, mib / acceptor.devices[device_id].device.memory_mib)


class Interner(Generic[T]):
    """Hashable values <-> small integers, so hot lookups hash an int, not a tuple."""

    def __init__(self) -> None:
        self.ids: dict[T, int] = {}
        self.values: list[T] = []

    def __call__(self, value: T) -> int:
        found = self.ids.get(value)
        if found is None:
            found = self.ids[value] = len(self.values)
            self.values.append(value)
        return found


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


class Ranking:
    """One kind of request's scores of shapes, and heaps of entries. An entry is dropped when
    it reaches the top and its shape left, or changed its first name or score."""

    __slots__ = ("current", "epoch", "fresh", "memo", "seen", "slack", "stale")

    def __init__(self, seen: int, epoch: int) -> None:
        #: shape id -> what it scored, or None: the demand does not fit (in any epoch)
        self.memo: dict[int, Found | None] = {}
        #: the shapes scored in the policy's epoch, ``epoch``
        self.current: set[int] = set()
        #: scored in the policy's epoch: the first valid entry is the choice
        self.fresh: list[Entry] = []
        #: scored in earlier ones: redone when they might beat the choice
        self.stale: list[Entry] = []
        #: how far into the placer's log of shapes that gained acceptors this has scored
        self.seen = seen
        self.epoch = epoch
        #: the most a score has dropped when redone in this epoch
        self.slack = 0.0
