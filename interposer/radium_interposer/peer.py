"""What a client tells the worker about itself, per connection: the ``cl`` key of a CALL
(docs/data-plane.md, "Operations").

``cl`` is ``{"np": 0|1, "env": {...}}``, each field only when the worker has not heard it yet on
this connection: ``np``, whether the client has numpy of its own (then numpy scalars come back
by value, else as remote objects: :mod:`radium_interposer.scalars`), sent with the first
request and when it changes; ``env``, the program's framework settings
(:mod:`radium_interposer.settings`), sent with the first request (before the first remote
import, when libraries read them) and with a later ``import`` when they changed.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from radium_interposer import ops, scalars, settings

__all__ = ["describe", "receive", "told"]

#: The attribute of a connection holding what it last told the worker (numpy, settings): an
#: attribute, not a weak dictionary, as it is read on every request.
_TOLD = "radium_told"


def describe(conn: Any, meta: Dict[str, Any]) -> None:
    """Add ``cl`` to a request's metadata when the worker must hear something new."""
    told: Optional[Tuple[bool, Dict[str, str]]] = getattr(conn, _TOLD, None)
    has_numpy = scalars._numpy() is not None
    if told is not None and told[0] == has_numpy and meta.get("op") != ops.IMPORT:
        return  # the common case: a call on a connection that said it all
    tell: Dict[str, Any] = {}
    if told is None or told[0] != has_numpy:
        tell["np"] = int(has_numpy)
    env = told[1] if told is not None else {}
    if told is None or meta.get("op") == ops.IMPORT:
        fresh = settings.collect()
        if fresh != env:  # the worker only ever sets variables: nothing new, nothing to say
            tell["env"] = env = fresh
    setattr(conn, _TOLD, (has_numpy, env))
    if tell:
        meta["cl"] = tell


def told(conn: Any) -> bool:
    """Whether a call on ``conn`` has nothing to tell (describe would add no ``cl``)."""
    said: Optional[Tuple[bool, Dict[str, str]]] = getattr(conn, _TOLD, None)
    return said is not None and said[0] == (scalars._numpy() is not None)


def receive(meta: Dict[str, Any]) -> None:
    """On the worker: take what the client said (``cl``) before its request runs."""
    said = meta.get("cl")
    if said is None:
        return
    if not isinstance(said, dict):
        raise ValueError("cl must be a mapping")
    if "np" in said:
        scalars.peer.numpy = bool(said["np"])
    env = said.get("env")
    if env is not None:
        if not isinstance(env, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env.items()
        ):
            raise ValueError("cl.env must map variable names to strings")
        settings.apply(env)
