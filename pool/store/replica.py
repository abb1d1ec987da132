"""One pool replica on etcd: campaign, serve while leading, stand by again when deposed.

Only the leader listens, so a client's list of pool addresses finds it by trying them in turn:
the others refuse the connection at once (docs/store.md).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Awaitable, Callable

from radium.configtree import Config
from radium.errors import UnavailableError
from radium.pool.store import leadership
from radium.pool.store.base import Store
from radium.pool.store.etcd import EtcdStore
from radium.pool.store.etcd_kv import EtcdKV

__all__ = ["Lead", "connect", "serve"]

log = logging.getLogger(__name__)
Lead = Callable[
    [Config, Store, asyncio.Event, "asyncio.Event | None", "asyncio.Event | None"],
    Awaitable[None],
]


def connect(config: Config) -> EtcdKV:
    """The etcd client of the pool's ``[pool.etcd]``."""
    etcd = config.pool.etcd
    return EtcdKV(etcd.endpoints, timeout=etcd.timeout, ca=etcd.ca, cert=etcd.cert, key=etcd.key)


async def serve(
    config: Config, stop: asyncio.Event, ready: asyncio.Event | None, lead: Lead
) -> None:
    """Campaign; serve through ``lead`` while leading; stand by again when deposed; until
    ``stop``."""
    settings = config.pool
    kv = connect(config)
    loop = asyncio.get_running_loop()
    halt = threading.Event()  # the campaign's thread waits on it
    halting = asyncio.create_task(_set_when(stop, halt))
    try:
        while not stop.is_set():
            held = await asyncio.to_thread(
                leadership.campaign,
                kv,
                settings.etcd.prefix,
                settings.listen,
                settings.etcd.election_ttl,
                stop=halt,
            )
            if held is None:
                break
            lost = asyncio.Event()
            held.start(_notify(loop, lost))
            try:
                store = EtcdStore(kv, settings.etcd.prefix, held, settings.ended_kept)
                await lead(config, store, stop, ready, lost)
            except UnavailableError as exc:  # etcd failed, or a commit found a new leader
                log.error("cannot lead: %s", exc.one_line())
            finally:
                held.resign()
    finally:
        halting.cancel()
        kv.close()


def _notify(loop: asyncio.AbstractEventLoop, lost: asyncio.Event) -> Callable[[str], None]:
    """What the leadership's thread calls when it is lost: set ``lost`` on the pool's loop."""

    def notify(why: str) -> None:
        loop.call_soon_threadsafe(lost.set)

    return notify


async def _set_when(event: asyncio.Event, flag: threading.Event) -> None:
    await event.wait()
    flag.set()
