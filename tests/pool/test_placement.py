"""Placement policies on the shape index: FGD keeps fractions usable; CPU and selectors hold."""

from __future__ import annotations

from radium.pool.demand import demand_of
from radium.pool.model import AcceptorState, Device, DeviceState, Request
from radium.pool.placement import Placer
from radium.pool.policies import FGD, BestFit, Workload


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
