"""Keep the pool's registered images in this acceptor's engine, reporting progress to the pool.

Pulls run in threads (the engine calls block); each progress step is sent to the pool as an
``ImageStatus``. Without an engine every pull fails at once, saying how to configure one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from radium.acceptor.engines import Engine
from radium.errors import RadiumError
from radium.proto import pool_pb2 as pb

__all__ = ["NO_ENGINE", "ImageKeeper", "Report"]

log = logging.getLogger(__name__)
Report = Callable[[pb.ImageStatus], Awaitable[object]]
NO_ENGINE = 'this acceptor has no container engine (set [acceptor] engine = "docker")'


class ImageKeeper:
    """Pulls and removes the images the pool registers, and reports each one's progress."""

    def __init__(self, name: str, engine: Engine | None, report: Report) -> None:
        self.name, self.engine, self.report = name, engine, report
        self.tasks: set[asyncio.Task[None]] = set()

    def _status(
        self, ref: str, state: str, progress: float = 0.0, digest: str = "", error: str = ""
    ) -> pb.ImageStatus:
        return pb.ImageStatus(
            ref=ref, acceptor=self.name, state=state, progress=progress, digest=digest, error=error
        )

    async def _send(self, status: pb.ImageStatus) -> None:
        try:
            await self.report(status)
        except Exception as exc:  # the pool may be away: it asks again on registration
            log.warning("reporting image %s: %s", status.ref, exc)

    def start(self, coroutine: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coroutine)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def pull(self, ref: str) -> None:
        if self.engine is None:
            await self._send(self._status(ref, "failed", error=NO_ENGINE))
            return
        loop = asyncio.get_running_loop()
        engine = self.engine

        def progress(fraction: float) -> None:
            status = self._status(ref, "pulling", progress=fraction)
            asyncio.run_coroutine_threadsafe(self._send(status), loop)

        await self._send(self._status(ref, "pulling"))
        log.info("pulling %s through %s", ref, engine.name)
        try:
            digest = await asyncio.to_thread(engine.pull, ref, progress)
        except RadiumError as exc:
            log.warning("pulling %s failed: %s", ref, exc.message)
            await self._send(self._status(ref, "failed", error=exc.message))
            return
        log.info("pulled %s (%s)", ref, digest)
        await self._send(self._status(ref, "ready", progress=1.0, digest=digest))

    async def remove(self, ref: str) -> None:
        if self.engine is not None:
            try:
                await asyncio.to_thread(self.engine.remove, ref)
            except RadiumError as exc:
                await self._send(self._status(ref, "failed", error=exc.message))
                return
        await self._send(self._status(ref, "removed"))

    def has(self, ref: str) -> bool:
        """Whether the engine holds ``ref`` now (blocking: a quick inspect)."""
        try:
            return self.engine is not None and self.engine.digest(ref) is not None
        except RadiumError:
            return False
