"""Checking a request and placing it, with an error that says why when it cannot be placed.

Where it goes is :mod:`radium.pool.core.placement`'s job, scored by a policy from
:mod:`radium.pool.core.policies`. Memory and CPU are never over-committed.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Iterable

from radium.errors import CapacityError, InvalidRequestError
from radium.pool.core.demand import matches
from radium.pool.core.placement import Placer
from radium.pool.core.policies import BestFit
from radium.pool.model import MAX_GPUS, AcceptorState, Placement, Request

__all__ = ["WAIT_OPTIONS", "no_capacity", "place", "validate"]


def validate(request: Request) -> None:
    """Refuse, naming why, a request no pool could grant as asked: whole GPUs and a part at once,
    more GPUs than any pool serves, a fraction out of range, nothing at all, a negative wait."""
    if request.gpus and (request.fraction or request.memory_mib):
        raise InvalidRequestError("ask for whole GPUs or a part of one, not both")
    if request.gpus > MAX_GPUS:
        raise InvalidRequestError(
            f"{request.gpus} GPUs is more than any pool serves (at most {MAX_GPUS})"
        )
    if request.fraction and request.memory_mib:
        raise InvalidRequestError("ask for a fraction or for memory, not both")
    if not (math.isfinite(request.fraction) and 0.0 <= request.fraction <= 1.0):
        raise InvalidRequestError(f"fraction must be in (0, 1], got {request.fraction}")
    if not (request.gpus or request.fraction or request.memory_mib):
        raise InvalidRequestError(
            "ask for at least 1 GPU, a fraction in (0, 1], or some memory (MiB)"
        )
    if (
        not math.isfinite(request.wait)
        or request.wait < 0
        or not math.isfinite(request.ttl)
        or request.ttl < 0
    ):
        raise InvalidRequestError("wait and ttl must be finite and not negative")


def place(
    request: Request, acceptors: Iterable[AcceptorState], placer: Placer | None = None
) -> Placement:
    """The placement for ``request``; CapacityError saying what is free when there is none.

    ``placer`` is the pool's standing index over the same acceptors; without one, a best-fit
    index is built for this call.
    """
    validate(request)
    if placer is None:
        placer = Placer(BestFit())
        acceptors = list(acceptors)
        for acceptor in acceptors:
            placer.update(acceptor)
    placement = placer.place(request)
    if placement is not None:
        return placement
    if not placer.free_summary(request)[0] and not any(
        matches(a, s.device, request) for a in acceptors for s in a.devices.values()
    ):
        whole = dataclasses.replace(request, gpus=1, fraction=0.0, memory_mib=0)
        if not request.gpus and any(
            matches(a, s.device, whole) for a in acceptors for s in a.devices.values()
        ):  # only GPUs labelled sharing=exclusive match: their acceptors cannot run MPS
            raise InvalidRequestError(
                f"no device in the pool takes {request.describe()}: the GPUs that match take "
                "whole-GPU leases only (sharing=exclusive: NVIDIA MPS is not available there)",
                hint="ask for whole GPUs, or see radium gpus and docs/gpus.md",
            )
        raise InvalidRequestError(f"no device in the pool matches {request.describe()}")
    raise no_capacity(request, placer, "")


#: How a request says it may wait, whichever way it was made (radium exec and run, the
#: environment, an annotation).
WAIT_OPTIONS = "--wait SECONDS (RADIUM_WAIT, radium.io/wait; up to 3600)"


def no_capacity(request: Request, placer: Placer, when: str) -> CapacityError:
    """The refusal of ``request`` (``when``: " within 5s", or "") saying what is free now and
    that it may wait for more."""
    matching, whole, best = placer.free_summary(request)
    wanted = f"no capacity for {request.describe()}{when}"
    if not matching:
        return CapacityError(
            f"{wanted}: no matching acceptor is up", hint=f"wait for one: {WAIT_OPTIONS}"
        )
    plural = "s" if whole != 1 else ""
    return CapacityError(
        f"{wanted}: {whole} matching GPU{plural} wholly free, at most {best} MiB free on one",
        hint=f"ask for what is free, or wait {'longer' if when else 'for it'}: {WAIT_OPTIONS}",
    )
