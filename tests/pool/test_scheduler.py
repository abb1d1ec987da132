from __future__ import annotations

import pytest

from radium.errors import CapacityError, InvalidRequestError
from radium.pool.core import scheduler
from radium.pool.model import AcceptorState, Device, DeviceState, Request


def acceptor(
    name: str, n: int, memory: int = 16000, vendor: str = "nvidia", up: bool = True, **labels: str
) -> AcceptorState:
    devices = {str(i): DeviceState(Device(str(i), vendor, "A100", memory)) for i in range(n)}
    return AcceptorState(name, f"{name}:7401", labels, devices, up=up)


def test_whole_gpus_pick_the_tightest_acceptor() -> None:
    big, small = acceptor("big", 4), acceptor("small", 2)
    placement = scheduler.place(Request(gpus=2), [big, small])
    assert placement.acceptor == "small"
    assert placement.devices == {"0": 16000, "1": 16000}
    assert placement.fraction == 1.0
    assert scheduler.place(Request(gpus=3), [big, small]).acceptor == "big"


def test_whole_gpus_never_on_a_partly_used_device() -> None:
    a = acceptor("a", 1)
    a.devices["0"].used_mib = 1
    with pytest.raises(CapacityError, match="no capacity for 1 whole GPU"):
        scheduler.place(Request(gpus=1), [a])


def test_fractions_bin_pack_and_never_overcommit() -> None:
    a = acceptor("a", 2, memory=1000)
    a.devices["1"].used_mib = 600
    placement = scheduler.place(Request(fraction=0.4), [a])
    assert (placement.acceptor, placement.devices) == ("a", {"1": 400})  # the fuller device
    a.devices["1"].used_mib = 1000
    assert scheduler.place(Request(memory_mib=1000), [a]).devices == {"0": 1000}
    a.devices["0"].used_mib = 1
    with pytest.raises(CapacityError, match="at most 999 MiB free on one"):
        scheduler.place(Request(memory_mib=1000), [a])


def test_selector_and_min_memory() -> None:
    amd = acceptor("amd", 1, vendor="amd", zone="b")
    nv = acceptor("nv", 1, memory=8000, zone="a")
    assert scheduler.place(Request(gpus=1, selector={"vendor": "amd"}), [amd, nv]).acceptor == "amd"
    assert scheduler.place(Request(gpus=1, selector={"zone": "a"}), [amd, nv]).acceptor == "nv"
    assert scheduler.place(Request(gpus=1, min_memory_mib=10000), [amd, nv]).acceptor == "amd"
    with pytest.raises(InvalidRequestError, match="no device in the pool matches"):
        scheduler.place(Request(gpus=1, selector={"zone": "mars"}), [amd, nv])


def test_down_acceptors_get_nothing() -> None:
    with pytest.raises(CapacityError, match="no matching acceptor is up"):
        scheduler.place(Request(gpus=1), [acceptor("a", 4, up=False)])


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (Request(), "ask for at least 1 GPU"),
        (Request(gpus=10**9), "at most 1024"),
        (Request(gpus=2**32 - 1), "at most 1024"),
        (Request(fraction=1.5), "fraction must be in (0, 1]"),
        (Request(fraction=float("nan")), "fraction must be in (0, 1]"),
        (Request(gpus=1, fraction=0.5), "not both"),
        (Request(fraction=0.5, memory_mib=10), "not both"),
        (Request(gpus=1, wait=float("inf")), "finite"),
    ],
)
def test_invalid_requests(request_: Request, message: str) -> None:
    with pytest.raises(InvalidRequestError) as info:
        scheduler.place(request_, [acceptor("a", 1)])
    assert message in info.value.message
