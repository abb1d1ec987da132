"""Registered images and where each acceptor stands with it (pulling, ready, failed, removed).

The pool keeps the list of images its acceptors should hold; acceptors pull them through their
local engine and report progress, also when they join later. Every change wakes whoever watches
(``radium images add`` streams progress from here).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import replace

from radium.errors import InvalidRequestError
from radium.pool.model import ImageStatus
from radium.pool.store.base import Store

__all__ = ["DONE_ADDING", "DONE_REMOVING", "GONE", "RECHECK", "Images", "check_ref"]

PULLING, READY, FAILED, REMOVING, REMOVED = "pulling", "ready", "failed", "removing", "removed"
GONE = "the acceptor went away; it catches up when it registers again"
RECHECK = 2.0
DONE_ADDING = frozenset((READY, FAILED))
DONE_REMOVING = frozenset((REMOVED, FAILED))
_REF_LIMIT = 512


def check_ref(ref: str) -> str:
    """``ref`` stripped, or an ``InvalidRequestError`` when it cannot be an image reference."""
    ref = ref.strip()
    if not ref or len(ref) > _REF_LIMIT or any(c.isspace() for c in ref):
        raise InvalidRequestError(f"{ref!r} is not an image reference")
    return ref


class Images:
    """The registered images and each acceptor's status with each, written through ``store``."""

    def __init__(self, store: Store) -> None:
        self.store = store
        refs, statuses = store.load_images()
        self.refs: set[str] = set(refs)
        self.status: dict[tuple[str, str], ImageStatus] = {(s.ref, s.acceptor): s for s in statuses}
        self.changed = asyncio.Event()

    def _set(self, status: ImageStatus) -> None:
        self.status[(status.ref, status.acceptor)] = status
        self.store.save_image_status(status)
        self.changed.set()
        self.changed = asyncio.Event()

    def add(self, ref: str, acceptors: list[str], now: float) -> None:
        self.refs.add(ref)
        self.store.save_image(ref, now)
        for name in acceptors:
            self._set(ImageStatus(ref, name))

    def remove(self, ref: str, acceptors: list[str]) -> None:
        if ref not in self.refs:
            raise InvalidRequestError(f"image {ref} is not registered", hint="radium images ls")
        self.refs.discard(ref)
        self.store.drop_image(ref)
        for name in acceptors:
            self._set(replace(self.status.get((ref, name), ImageStatus(ref, name)), state=REMOVING))

    def report(self, status: ImageStatus) -> None:
        """An acceptor's news; a removal's end forgets the row."""
        if status.state == REMOVED:
            self.status.pop((status.ref, status.acceptor), None)
            self.store.drop_image_status(status.ref, status.acceptor)
            self.changed.set()
            self.changed = asyncio.Event()
            return
        self._set(status)

    def _row(self, ref: str, acceptor: str, done: frozenset[str], connected: bool) -> ImageStatus:
        row = self.status.get((ref, acceptor)) or ImageStatus(ref, acceptor, REMOVED)
        if row.state in done or connected:
            return row
        return replace(row, state=FAILED, error=GONE)

    def missing_on(self, acceptor: str) -> list[str]:
        """Registered images this acceptor has not reported ready (to pull on registration)."""
        return sorted(
            ref
            for ref in self.refs
            if (s := self.status.get((ref, acceptor))) is None or s.state != READY
        )

    def ready_on(self, acceptor: str) -> set[str]:
        return {
            ref
            for ref in self.refs
            if (s := self.status.get((ref, acceptor))) is not None and s.state == READY
        }

    def poke(self) -> None:
        """Wake followers without a change of status (an acceptor connected or went away)."""
        self.changed.set()
        self.changed = asyncio.Event()

    async def follow(
        self,
        ref: str,
        acceptors: list[str],
        done: frozenset[str],
        timeout: float,
        connected: Callable[[str], bool] = lambda name: True,
    ) -> AsyncIterator[list[ImageStatus]]:
        """Yield the statuses of ``ref`` on these acceptors at each change until all are done.

        An acceptor that goes away meanwhile counts as failed for this follower (it pulls, or
        removes, when it registers again).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            rows = [self._row(ref, a, done, connected(a)) for a in acceptors]
            yield rows
            if all(r.state in done for r in rows) or loop.time() >= deadline:
                return
            event = self.changed
            # Woken by news, or every few seconds: an acceptor may be marked down meanwhile.
            wait = min(RECHECK, max(0.0, deadline - loop.time()))
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(event.wait(), timeout=wait)
