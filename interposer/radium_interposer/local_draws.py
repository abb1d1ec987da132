"""The program's draws from the standard library's global generator, here, while calls that may
draw on the worker stream (docs/remoting.md, "Random generators").

Once shipped code can reach ``random``, the program's generator lives on both sides. Calls
stream anyway: each carries the generator's state only when the program drew here since, and
the worker's generator goes on from its draws. A draw *here* is the one moment the worker's
state must be here first, so each of ``random``'s module functions (``random.random``,
``shuffle``, ``seed``, ...: bound methods of its global generator) is wrapped, before the
program runs, by one that first asks each connection with streamed calls outstanding for the
worker's state (a ``ping`` with ``ps``: one round trip), then draws. A ``random.random()`` here
costs ~70 ns while no generator is synced (one test of a set), ~90 ns while one is and nothing
streamed, against ~20 ns unwrapped. (A forked child needs nothing: Python reseeds its
generator.)

Each draw here is marked too (``program_state.moved``): a call reads the state, to send it,
only when it moved since its connection last read it. Not seen at all: draws through
``random._inst`` itself, or through a module function taken before the interposer started
(nothing of the program runs before that).
"""

from __future__ import annotations

import functools
import os
import random
from typing import Any, Callable, Dict

from radium_interposer import ops, program_state
from radium_interposer.client import state

__all__ = ["install"]


def install() -> None:
    """Wrap ``random``'s module functions (idempotent)."""
    generator = getattr(random, "_inst", None)
    if generator is None or getattr(random, "__radium_draws__", False):
        return
    for name in random.__all__:
        method = getattr(random, name, None)
        if method is not None and getattr(method, "__self__", None) is generator:
            setattr(random, name, _guarded(name, method))
    random.__radium_draws__ = True  # type: ignore[attr-defined]
    program_state.stream_random()


def _guarded(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    synced, stale, moved, moves = (
        program_state.kinds, program_state.stale, program_state.moved, program_state.moves
    )  # fmt: skip

    @functools.wraps(method)
    def draw(*args: Any, **kwargs: Any) -> Any:
        if not synced:  # no shipped code reaches a generator: a plain draw
            return method(*args, **kwargs)
        if stale:  # calls streamed since the worker's state was last here
            pull()
        try:
            return method(*args, **kwargs)
        finally:  # after the draw: a call that reads the mark reads the state after it
            moved[0] = next(moves)

    # The module's own name for it: shipped code that uses it refers to the worker's random.NAME.
    draw.__module__, draw.__qualname__ = "random", name
    return draw


def pull() -> None:
    """The worker's generator states here, from each connection with streamed calls since its
    last answer that carried them. A streamed call's error is raised here, the program's next
    point that waits, as at a ``print``; other threads' connections are asked quietly (their
    errors are theirs)."""
    mine = getattr(state.local, "conn", None)
    for conn in list(program_state.stale):
        if conn.pid != os.getpid() or conn.broken:
            program_state.stale.discard(conn)
            continue
        if conn.serving:  # in a callback: the worker's call runs on, as before streaming
            continue
        meta: Dict[str, Any] = {"op": ops.PING}
        if conn is not mine:
            meta["q"] = 1
        program_state.before_call(conn, meta)
        conn.request(meta)  # its answer's ps (even empty) ends the connection's staleness
