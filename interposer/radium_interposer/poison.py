"""The worker's side of streamed calls that raise: the first error of one *poisons* the
connection, whether the call returns nothing (``nv``) or its result stays remote (that result
keeps the error too, for its uses). Its later streamed calls do not run (locally the program
stopped at the error: nothing after it may have effects), and its next request that waits for
an answer is answered with that error instead of running, with ``at``, the failed call's id, so
the client names the call's line (docs/data-plane.md, "Streamed calls and the poisoned
connection"). A streamed call's error is raised even when the program never uses its result.

One exception: the exit of a remote ``with`` whose body made the failed call runs
(``exits.clean_exit``, waiting or streamed), and the manager sees the error as its body's, as
locally.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from radium_interposer import ops, wire
from radium_interposer.handles import Failure, HandleTable
from radium_interposer.naming import error_meta
from radium_interposer.tags import PATH

__all__ = ["CLEAN_EXIT", "Poison", "answer", "answer_instead", "exit_takes", "fail"]

Poison = Tuple[int, BaseException]
#: A remote ``with``'s exit after a body that raised nothing here (exits.clean_exit).
CLEAN_EXIT = "radium_interposer.exits.clean_exit"
_CLEAN_EXIT = {"$": PATH, "p": CLEAN_EXIT}


def fail(session: Any, handle: int, error: BaseException) -> None:
    """A streamed call raised: the first such error poisons."""
    if session.poison is None:
        session.poison = (handle, error)
    session.failed.append((handle, error))  # a `with` body's, for exits.clean_exit


def answer_instead(session: Any, meta: Dict[str, Any]) -> Optional[Poison]:
    """The poison a request meets: for a streamed call, the error its result takes instead of
    running; for a request that waits, the error to answer (then cleared). None: it runs."""
    poison: Optional[Poison] = session.poison
    if poison is None or (meta.get("op") == ops.PING and meta.get("q")):
        return None  # a quiet barrier: the error waits for the connection's next request
    args = meta.get("a")
    if (
        meta.get("f") == _CLEAN_EXIT
        and isinstance(args, list)
        and len(args) == 2
        and exit_takes(session, args[1])
    ):
        return None
    if not meta.get("nr"):
        session.poison = None
    return poison


def exit_takes(session: Any, start: Any) -> bool:
    """Whether a remote ``with``'s ``clean_exit`` (JSON or a record), its body begun at call
    id ``start``, takes the poison: its body made the failed call. The manager's exit gets the
    error then (clean_exit reads session.failed), waiting or streamed: it suppresses it, as
    locally, or raises it again (then it poisons again). The poison is cleared."""
    poisoned: Optional[Poison] = session.poison
    if poisoned is None or type(start) is not int or poisoned[0] < start:
        return False
    session.poison = None
    return True


def answer(session: Any, frame: wire.Frame, poisoned: Poison, table: HandleTable) -> None:
    """A request on a poisoned connection (answer_instead): a streamed call's result takes the
    error, a request that waits is answered with it."""
    meta = frame.meta
    if meta.get("nr"):
        if isinstance(meta.get("r"), int) and not meta.get("nv"):
            table.put(meta["r"], Failure(poisoned[1]))
        return
    session.answer(wire.ERROR, frame.call_id, {**error_meta(poisoned[1]), "at": poisoned[0]}, [])
