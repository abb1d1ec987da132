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
from typing import Callable, ContextManager, Iterator, Protocol, runtime_checkable

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


@runtime_checkable
class Deferring(Protocol):
    """A store that can leave changes open (:class:`radium.pool.store.SQLiteStore`,
    :class:`radium.pool.etcd_store.EtcdStore`)."""

    on_open: Callable[[], None]

    def deferring(self) -> ContextManager[None]: ...

    def commit(self) -> None: ...


class Deferrable:
    """The switch of a store that can defer its changes (:class:`Deferring`): on for the
    changes made within :meth:`deferring`."""

    def __init__(self) -> None:
        self._deferring = False
        #: Told when the first change of a batch is deferred.
        self.on_open: Callable[[], None] = lambda: None

    @contextlib.contextmanager
    def deferring(self) -> Iterator[None]:
        self._deferring = True
        try:
            yield
        finally:
            self._deferring = False


class GroupCommit:
    def __init__(self, store: Deferring, failed: Callable[[UnavailableError], None]) -> None:
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
