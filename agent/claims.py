"""Containers attached to a DRA claim's lease (docs/agent-protocol.md, "Claims").

``radium dra serve`` holds a claim's lease under the key ``claim/<uid>``; a container whose
request names the claim gets that lease, its own ``lease.json`` and data-plane socket, and no
second lease. Releasing the container detaches it; releasing the claim detaches them all.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from radium.agent.book import Held, LeaseBook, write_lease_file
from radium.agent.broker import ConnectionBroker
from radium.agentprotocol import claim_key
from radium.errors import InvalidRequestError, RadiumError
from radium.shim.pods import CLAIM

__all__ = ["CLAIM", "attach", "detach_all"]

log = logging.getLogger(__name__)


async def attach(
    book: LeaseBook,
    broker: ConnectionBroker,
    started: Callable[[int], float],
    container: str,
    message: dict[str, Any],
    uid: str,
) -> dict[str, Any]:
    """Attach ``container`` to the lease of claim ``uid``; the lease as the container sees it."""
    claim = book.get(claim_key(uid))
    if claim is None or claim.claim:
        raise InvalidRequestError(
            f"claim {uid} is not prepared on this node",
            hint="kubelet prepares a pod's claims before its containers start (radium dra serve)",
        )
    pid = int(message.get("pid", 0))
    held = Held(
        container,
        claim.lease_id,
        claim.ttl,
        pid,
        started(pid),
        str(message.get("runtime_dir", "")),
        dict(claim.lease),
        claim.credential,
        claim=claim.container,
    )
    await book.add(held)
    write_lease_file(held)
    try:
        await broker.open(held)
    except RadiumError:
        await book.remove(container)
        raise
    log.info("container %s: attached to %s (lease %s)", container, claim.container, held.lease_id)
    return held.lease


async def detach_all(book: LeaseBook, broker: ConnectionBroker, claim: str) -> None:
    """Detach every container from the lease of ``claim`` (which is being released): each is
    told in its ``lease.json``."""
    for held in book:
        if held.claim == claim:
            await book.remove(held.container)
            broker.close(held.container)
            held.lease.update(state="released", message=f"{claim} was unprepared")
            write_lease_file(held)
            log.info("container %s: detached, %s was released", held.container, claim)
