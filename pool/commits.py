"""Group commit: the lease calls answered in one turn of the pool's loop share one commit.

Under load a hundred node agents' calls arrive in the same turn; committing each alone cost
SQLite more than the rest of the call. Calls made within :meth:`Commits.deferred` leave their
changes in one open transaction, committed in the loop's next turn, and every answer waits for
that commit (:meth:`Commits.when_committed`) before it is sent: an answer still never tells of a
change that a crash could lose (docs/store.md). A commit that fails fails those answers and
stops the pool, whose memory then holds changes its database does not; its restart reloads
what was committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Callable, ContextManager, Iterator, Protocol

from radium.errors import RadiumError, UnavailableError

log = logging.getLogger(__name__)
#: Told None once every change made before it was handed over is committed, or what failed.
Committed = Callable[[RadiumError | None], None]


class Commits(Protocol):
    def deferred(self) -> ContextManager[None]:
        """Changes made within may commit after they return."""
        ...

    def when_committed(self, then: Committed) -> None:
        """Call ``then`` once every change made so far is committed (at once if all are)."""
        ...


async def committed(commits: Commits) -> None:
    """Return once every change made so far is committed; raise what failed the commit."""
    done: asyncio.Future[RadiumError | None] = asyncio.get_running_loop().create_future()

    def then(error: RadiumError | None) -> None:
        if not done.done():  # the caller may have gone away meanwhile
            done.set_result(error)

    commits.when_committed(then)
    error = await done
    if error is not None:
        raise error


class Immediate:
    """Every change commits before it returns (a store that defers nothing)."""

    def deferred(self) -> ContextManager[None]:
        return contextlib.nullcontext()

    def when_committed(self, then: Committed) -> None:
        then(None)


class Deferrable:
    """What a store that can defer changes shares (:class:`radium.pool.store.SQLiteStore`,
    :class:`radium.pool.etcd_store.EtcdStore`): changes made within :meth:`deferring` are held
    until :meth:`commit` (the first of a batch tells ``on_open``); a change made outside commits
    them first (:meth:`_commit_ahead`), and if that fails, :meth:`commit` raises it too, so the
    answers waiting for them are not told of changes that were not stored."""

    def __init__(self) -> None:
        self._deferring = False
        self._holding = False
        self._failed: UnavailableError | None = None
        #: Told when the first change of a batch is deferred.
        self.on_open: Callable[[], None] = lambda: None

    @contextlib.contextmanager
    def deferring(self) -> Iterator[None]:
        self._deferring = True
        try:
            yield
        finally:
            self._deferring = False

    def commit(self) -> None:
        """Commit the held changes (nothing if none); raise what failed them."""
        failed, self._failed = self._failed, None
        if failed is not None:
            raise failed
        self._holding = False
        self._send_held()

    def _hold(self) -> None:
        """A change is held: the first of a batch tells ``on_open``."""
        if not self._holding:
            self._holding = True
            self.on_open()

    def _commit_ahead(self) -> None:
        """Commit the held changes for a change made outside :meth:`deferring` (ahead of it,
        or with it); a failure is kept for the commit their answers wait for."""
        holding, self._holding = self._holding, False
        try:
            self._send_held()
        except UnavailableError as exc:
            if holding:
                self._failed = exc
            raise

    def _send_held(self) -> None:
        raise NotImplementedError


class GroupCommit:
    def __init__(self, store: Deferrable, failed: Callable[[UnavailableError], None]) -> None:
        self.store = store
        self.failed = failed
        #: Waiting for the commit the loop's next turn makes; None when nothing is pending.
        self.waiting: list[Committed] | None = None
        store.on_open = self._opened

    def deferred(self) -> ContextManager[None]:
        return self.store.deferring()

    def when_committed(self, then: Committed) -> None:
        if self.waiting is None:
            then(None)
        else:
            self.waiting.append(then)

    def _opened(self) -> None:
        if self.waiting is None:
            self.waiting = []
            asyncio.get_running_loop().call_soon(self._commit)

    def _commit(self) -> None:
        waiting, self.waiting = self.waiting or [], None
        error: UnavailableError | None = None
        try:
            self.store.commit()
        except UnavailableError as exc:  # the store failed, or (etcd) this replica was deposed
            log.critical("%s", exc.one_line())
            error = exc
        for then in waiting:  # here, not in another turn: the answers go out in this one
            then(error)
        if error is not None:
            self.failed(error)
