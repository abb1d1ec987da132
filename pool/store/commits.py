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
import concurrent.futures
import contextlib
import logging
from typing import Any, Callable, ContextManager, Protocol

from radium.errors import RadiumError, StoreUnavailableError, UnavailableError

__all__ = ["Commits", "Committed", "Deferrable", "GroupCommit", "Immediate", "committed"]

log = logging.getLogger(__name__)
#: Told None once every change made before it was handed over is committed, or what failed.
Committed = Callable[[RadiumError | None], None]


class Commits(Protocol):
    """How the pool's answers wait for the commit of what they tell."""

    #: Called in the turn that told a batch of answers (each ``then``), once they are all
    #: told: a carrier that gathers the replies of a batch sends them then, not a turn later.
    told: list[Callable[[], None]]

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

    def __init__(self) -> None:
        self.told: list[Callable[[], None]] = []  # never called: answers are told at once

    def deferred(self) -> ContextManager[None]:
        return contextlib.nullcontext()

    def when_committed(self, then: Committed) -> None:
        then(None)


class _Deferring:
    """:meth:`Deferrable.deferring`'s scope: a class, not a generator, because every lease
    call enters one (a generator's context manager costs about five times as much)."""

    __slots__ = ("_store",)

    def __init__(self, store: Deferrable) -> None:
        self._store = store

    def __enter__(self) -> None:
        self._store._deferring = True

    def __exit__(self, *_: object) -> None:
        self._store._deferring = False


class Deferrable:
    """What a store that can defer changes shares (:class:`radium.pool.store.sqlite.SQLiteStore`,
    :class:`radium.pool.store.etcd.EtcdStore`): changes made within :meth:`deferring` are held
    until :meth:`commit` (the first of a batch tells ``on_open``); a change made outside commits
    them first (:meth:`_commit_ahead`), and if that fails, :meth:`commit` raises it too, so the
    answers waiting for them are not told of changes that were not stored."""

    #: Its held changes are a batch another thread may send while the loop holds the next
    #: (:meth:`commit_in`; etcd's operations). SQLite's are its connection's open
    #: transaction, which only the loop's thread may end.
    sends_in_background = False

    def __init__(self) -> None:
        self._deferring = False
        self._deferring_scope = _Deferring(self)
        self._holding = False
        self._failed: UnavailableError | None = None
        #: The batch a commit thread sends (:meth:`commit_in`), until a change waits for it.
        self._in_flight: concurrent.futures.Future[None] | None = None
        #: Told when the first change of a batch is deferred.
        self.on_open: Callable[[], None] = lambda: None

    def deferring(self) -> ContextManager[None]:
        return self._deferring_scope

    def commit(self) -> None:
        """Commit the held changes (nothing if none), after the batch in flight; raise what
        failed them."""
        failed, self._failed = self._failed, None
        if failed is not None:
            raise failed
        self._holding = False
        self._join()
        self._send_held()

    def commit_in(self, thread: concurrent.futures.Executor) -> concurrent.futures.Future[None]:
        """Send the held changes as one batch on ``thread`` (one that runs a batch at a time,
        so batches land in order); changes made from now on are held for the next. The future
        fails with what failed them. Only for a store that :attr:`sends_in_background`."""
        failed, self._failed = self._failed, None
        self._holding = False
        if failed is not None:
            refused: concurrent.futures.Future[None] = concurrent.futures.Future()
            refused.set_exception(failed)
            return refused
        self._in_flight = thread.submit(self._send_batch, self._take_held())
        return self._in_flight

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
            self._join()  # lands after the batch a commit thread sends
            self._send_held()
        except UnavailableError as exc:
            if holding:
                self._failed = exc
            raise

    def _join(self) -> None:
        """Wait for the batch in flight; raise what failed it."""
        in_flight, self._in_flight = self._in_flight, None
        if in_flight is not None:
            in_flight.result()

    def _send_held(self) -> None:
        raise NotImplementedError

    def _take_held(self) -> Any:
        """The held changes as a batch that :meth:`_send_batch` sends; none are held after."""
        raise NotImplementedError

    def _send_batch(self, batch: Any) -> None:
        raise NotImplementedError


class GroupCommit:
    """The pool's group commit (module docstring): the batch of a turn is committed in the
    loop's next turn, or, for a store that :attr:`~Deferrable.sends_in_background`, sent by a
    commit thread while the loop serves the next calls (docs/store.md)."""

    def __init__(self, store: Deferrable, failed: Callable[[UnavailableError], None]) -> None:
        self.store = store
        self.failed = failed
        #: Waiting for the batch being held; None when no change is held.
        self.waiting: list[Committed] | None = None
        #: Waiting for the batch the commit thread sends; None when none is in flight.
        self.sending: list[Committed] | None = None
        #: What failed a commit: every answer after it fails too (the pool is stopping).
        self.broken: UnavailableError | None = None
        self.told: list[Callable[[], None]] = []
        self._thread = (
            concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="radium-commit")
            if store.sends_in_background
            else None
        )
        store.on_open = self._opened

    def deferred(self) -> ContextManager[None]:
        return self.store.deferring()

    def when_committed(self, then: Committed) -> None:
        if self.waiting is not None:
            self.waiting.append(then)
        elif self.sending is not None:
            self.sending.append(then)
        else:
            then(self.broken)

    def close(self) -> None:
        """Wait for the batch in flight, if any, and end the commit thread."""
        if self._thread is not None:
            self._thread.shutdown(wait=True)

    def _opened(self) -> None:
        if self.waiting is None:
            self.waiting = []
            if self.sending is None:  # else it is sent once the one in flight is answered
                asyncio.get_running_loop().call_soon(self._commit)

    def _commit(self) -> None:
        waiting, self.waiting = self.waiting or [], None
        if self.broken is not None:
            self._tell(waiting, self.broken)
            return
        if self._thread is not None:
            self.sending = waiting
            sent = asyncio.wrap_future(self.store.commit_in(self._thread))
            sent.add_done_callback(self._sent)
            return
        try:
            self.store.commit()
        except UnavailableError as exc:  # the store failed, or (etcd) this replica was deposed
            self._break(waiting, exc)
        else:
            self._tell(waiting, None)

    def _sent(self, sent: asyncio.Future[None]) -> None:
        waiting, self.sending = self.sending or [], None
        error = sent.exception()
        if error is None:
            self._tell(waiting, None)
            if self.waiting is not None:  # held while this batch was in flight
                self._commit()
        elif isinstance(error, UnavailableError):
            self._break(waiting, error)
        else:  # a bug, not the store: its answers must not be lost in silence either
            log.error("the commit thread failed", exc_info=error)
            self._break(waiting, StoreUnavailableError(f"the pool's commit failed: {error!r}"))

    def _break(self, waiting: list[Committed], error: UnavailableError) -> None:
        log.critical("%s", error.one_line())
        self.broken = error
        held, self.waiting = self.waiting or [], None  # they may rest on the failed batch
        self._tell([*waiting, *held], error)
        self.failed(error)

    def _tell(self, waiting: list[Committed], error: UnavailableError | None) -> None:
        for then in waiting:  # here, not in another turn: the answers go out in this one
            then(error)
        for told in self.told:
            told()
