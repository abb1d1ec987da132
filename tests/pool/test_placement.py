"""Placement policies on the shape index: FGD keeps fractions usable; CPU and selectors hold."""

from __future__ import annotations

import random

from radium.pool.core.demand import Demand, Workload, demand_of, need_mib
from radium.pool.core.fgd import FGD
from radium.pool.core.placement import Placer
from radium.pool.core.policies import BestFit
from radium.pool.model import AcceptorState, Device, DeviceState, Placement, Request


def acceptor(name: str, free: list[int], cpu: int = 0, model: str = "T4") -> AcceptorState:
    devices = {}
    for i, mib in enumerate(free):
        state = DeviceState(Device(str(i), "nvidia", model, 1000))
        state.used_mib = 1000 - mib
        devices[str(i)] = state
    return AcceptorState(name, "", {}, devices, cpu_milli=cpu)


def placer(policy: BestFit | FGD, *acceptors: AcceptorState) -> Placer:
    p = Placer(policy)
    for a in acceptors:
        p.update(a)
    return p


def test_fgd_keeps_room_for_the_requests_it_sees() -> None:
    # The pool sees 0.6-GPU requests. A 0.3 request on the 0.65-free device (best-fit's
    # tightest) leaves 0.35 nobody can use; FGD puts it on a whole GPU instead.
    workload = Workload()
    for _ in range(20):
        workload.observe(demand_of(Request(fraction=0.6)))
    fgd = placer(FGD(workload), acceptor("x", [1000, 650]), acceptor("y", [1000]))
    bestfit = placer(BestFit(), acceptor("x", [1000, 650]), acceptor("y", [1000]))
    assert bestfit.place(Request(fraction=0.3)).devices == {"1": 300}  # type: ignore[union-attr]
    chosen = fgd.place(Request(fraction=0.3))
    assert chosen is not None and chosen.devices != {"1": 300}


def test_cpu_is_never_over_committed() -> None:
    p = placer(BestFit(), acceptor("small", [1000], cpu=2000), acceptor("big", [1000], cpu=8000))
    assert p.place(Request(gpus=1, cpu_milli=4000)).acceptor == "big"  # type: ignore[union-attr]
    assert p.place(Request(gpus=1, cpu_milli=9000)) is None


def test_model_alternatives_in_a_selector() -> None:
    p = placer(BestFit(), acceptor("t4", [1000]), acceptor("a10", [1000], model="A10"))
    chosen = p.place(Request(gpus=1, selector={"model": "V100|A10"}))
    assert chosen is not None and chosen.acceptor == "a10"
    assert p.place(Request(gpus=1, selector={"model": "V100"})) is None


def test_identical_acceptors_share_one_shape_and_the_first_name_wins() -> None:
    p = placer(FGD(), *(acceptor(f"n{i}", [1000, 1000]) for i in range(5)))
    assert len(p.members) == 1
    chosen = p.place(Request(fraction=0.5))
    assert chosen is not None and chosen.acceptor == "n0"


def test_what_is_free_counts_only_the_acceptors_a_request_names() -> None:
    p = placer(BestFit(), acceptor("a", [0, 0]), acceptor("b", [1000, 1000]))
    assert p.free_summary(Request(gpus=1, selector={"acceptor": "a"})) == (2, 0, 0)
    assert p.free_summary(Request(gpus=1)) == (4, 2, 1000)
    assert p.free_summary(Request(gpus=1, selector={"acceptor": "gone"})) == (0, 0, 0)


class FixedMix(Workload):
    """A workload that has learned its mix and learns no more."""

    def __init__(self, *requests: Request) -> None:
        super().__init__()
        for request in requests:
            super().observe(demand_of(request))

    def observe(self, demand: Demand) -> None:
        pass


def expected_fragment(free: list[int], cpu_free: int, mix: list[tuple[float, Demand]]) -> float:
    """The paper's expected fragment on one acceptor of 1000-MiB GPUs, summed plainly."""
    shares = [f / 1000 for f in sorted(free)]
    total = sum(shares)
    if total == 0:
        return 0.0
    expected = 0.0
    for p, demand in mix:
        if demand[3] and 0 <= cpu_free < demand[3]:
            expected += p * total
            continue
        need, usable, fitting = need_mib(demand, 1000), 0.0, 0
        for f, share in zip(sorted(free), shares):
            if need <= f:
                usable += share
                fitting += 1
        hostable = fitting >= demand[0] if demand[0] else fitting > 0
        expected += p * (total - usable if hostable else total)
    return expected


def reference_fgd(
    acceptors: list[AcceptorState], mix: list[tuple[float, Demand]], request: Request
) -> tuple[str, dict[str, int]] | None:
    """FGD by brute force: every acceptor, every option; ties to the first name."""
    demand = demand_of(request)
    need = need_mib(demand, 1000)
    best: tuple[float, str, dict[str, int]] | None = None
    for a in sorted(acceptors, key=lambda a: a.name):
        if demand[3] and 0 <= a.cpu_free < demand[3]:
            continue
        free = {d: s.free_mib for d, s in a.devices.items()}
        fits = sorted((d for d in free if free[d] >= need), key=lambda d: (free[d], d))
        if demand[0]:
            options = [fits[: demand[0]]] if len(fits) >= demand[0] else []
        else:  # one device of each amount free
            options = [[d] for i, d in enumerate(fits) if i == 0 or free[fits[i - 1]] < free[d]]
        before = expected_fragment(list(free.values()), a.cpu_free, mix)
        cpu_after = a.cpu_free - demand[3] if a.cpu_free >= 0 else -1
        for option in options:
            after = [f - need if d in option else f for d, f in free.items()]
            score = expected_fragment(after, cpu_after, mix) - before
            score += (free[option[0]] - need) / 1000 * 1e-6
            if best is None or score < best[0]:
                best = (score, a.name, dict.fromkeys(option, need))
    return None if best is None else (best[1], best[2])


def take(p: Placer, request: Request, chosen: Placement) -> None:
    a = p.acceptors[chosen.acceptor]
    for device, mib in chosen.devices.items():
        a.devices[device].used_mib += mib
    a.cpu_used += request.cpu_milli
    p.update(a)


def test_fgd_places_as_brute_force_does_while_leases_pile_up() -> None:
    # The incremental placer (a heap of scores per kind of request; caches per GPU part,
    # config and CPU bucket) against the definition, summed alike: the very same choice,
    # ties included, for every request until the pool is full.
    rng = random.Random(7)
    acceptors = [
        acceptor(f"n{i:02}", [1000] * rng.randint(1, 4), cpu=rng.choice([0, 8000, 16000]))
        for i in range(24)
    ]
    kinds = [Request(fraction=f / 10, cpu_milli=c) for f in (2, 3, 5, 7) for c in (0, 2000, 5000)]
    kinds += [Request(gpus=g, cpu_milli=c) for g in (1, 2) for c in (0, 4000)]
    mix = FixedMix(*kinds)
    p = placer(FGD(mix), *acceptors)
    for _ in range(300):
        request = rng.choice(kinds)
        chosen = p.place(request)
        got = None if chosen is None else (chosen.acceptor, chosen.devices)
        assert got == reference_fgd(list(p.acceptors.values()), mix.mix, request), request
        if chosen is not None:
            take(p, request, chosen)


def test_a_new_mix_rescores_the_choice() -> None:
    # Under 0.6-GPU requests a 0.3 goes on a whole GPU (the 0.35 left by the 0.65-free device
    # would be a fragment). Once the pool sees only 0.35s, that tightest fit is as good, and
    # the scores of the old mix must not keep the placer from it.
    workload = Workload(refresh=16, floor=0.2)
    for _ in range(15):
        workload.observe(demand_of(Request(fraction=0.6)))
    p = placer(FGD(workload), acceptor("x", [1000, 650]), acceptor("y", [1000]))
    chosen = p.place(Request(fraction=0.3))
    assert chosen is not None and chosen.devices != {"1": 300}
    for _ in range(64):
        workload.observe(demand_of(Request(fraction=0.35)))
    chosen = p.place(Request(fraction=0.3))
    assert chosen is not None and (chosen.acceptor, chosen.devices) == ("x", {"1": 300})
    assert reference_fgd(list(p.acceptors.values()), workload.mix, Request(fraction=0.3)) == (
        "x",
        {"1": 300},
    )


def test_acceptors_apart_only_in_cpu_nobody_needs_tie_and_the_first_name_wins() -> None:
    # The mix needs at most 2 cores: 8 and 16 free are alike.
    p = placer(FGD(), acceptor("b", [1000], cpu=16000), acceptor("a", [1000], cpu=8000))
    chosen = p.place(Request(fraction=0.5, cpu_milli=2000))
    assert chosen is not None and chosen.acceptor == "a"


def test_a_request_naming_acceptors_goes_to_one_of_them() -> None:
    p = placer(FGD(), *(acceptor(f"n{i}", [1000]) for i in range(4)))
    chosen = p.place(Request(fraction=0.5, selector={"acceptor": "n3|n2"}))
    assert chosen is not None and chosen.acceptor == "n2"
    assert p.place(Request(fraction=0.5, selector={"acceptor": "gone"})) is None


def test_what_is_free_follows_the_leases() -> None:
    a, b = acceptor("a", [1000, 1000]), acceptor("b", [1000, 400])
    p = placer(BestFit(), a, b)
    assert p.free_summary(Request(gpus=1)) == (4, 3, 1000)
    a.devices["0"].used_mib = 1000
    p.update(a)
    b.devices["0"].used_mib = 700
    p.update(b)
    assert p.free_summary(Request(gpus=1)) == (4, 1, 1000)
    p.forget("a")
    assert p.free_summary(Request(gpus=1)) == (2, 0, 400)


def test_compacting_the_index_changes_no_placement() -> None:
    p = placer(FGD(), *(acceptor(f"n{i}", [1000, 500 + 100 * i], cpu=8000) for i in range(5)))
    request = Request(fraction=0.4, cpu_milli=1000)
    first = p.place(request)
    assert first is not None
    take(p, request, first)
    expected = p.place(request)
    p._compact()
    assert p.place(request) == expected


def test_an_acceptor_registered_again_is_placed_by_its_new_devices_and_labels() -> None:
    p = placer(BestFit(), acceptor("x", [1000]))
    assert p.place(Request(gpus=1, selector={"model": "A10"})) is None
    again = acceptor("x", [1000, 1000], model="A10")  # a new registration: a new state
    again.labels = {"zone": "b"}
    p.update(again)
    chosen = p.place(Request(gpus=2, selector={"model": "A10", "zone": "b"}))
    assert chosen is not None and chosen.devices == {"0": 1000, "1": 1000}


def test_n_leases_of_one_nth_fit_a_device_of_any_size_and_keep_their_fraction() -> None:
    # An H100 has 81559 MiB: two halves rounded up took 40780 MiB each, one more than it has.
    h100 = AcceptorState("gpu", "", {}, {"0": DeviceState(Device("0", "nvidia", "H100", 81559))})
    p = placer(BestFit(), h100)
    first = p.place(Request(fraction=0.5))
    assert first is not None and first.fraction == 0.5 and first.devices == {"0": 40779}
    h100.devices["0"].used_mib = 40779
    p.update(h100)
    second = p.place(Request(fraction=0.5))
    assert second is not None and second.fraction == 0.5
    assert need_mib(demand_of(Request(fraction=0.47)), 16000) == 7520  # float noise costs none
