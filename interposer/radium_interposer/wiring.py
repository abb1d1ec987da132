"""Binds the client's upcalls (:mod:`radium_interposer.upcalls`) to the upper layers that serve
them: the one place where the layers meet, run by ``finder.install`` before the program's first
remote call (which also sets the codec's policies for a remoting client). Nothing imports this
module but that entry (and tests that drive the client in-process).

``shipping`` is bound through small functions that import it at first use: a program that never
ships a class or function does not pay for it (and its ``inspect``/``textwrap``) at start.
"""

from __future__ import annotations

import types
from typing import Any, Dict, List, Optional

from radium_interposer import (
    classes,
    client_objects,
    client_serving,
    program_state,
    upcalls,
)

__all__ = ["install"]


def install() -> None:
    """Bind every upcall (idempotent)."""
    bound = upcalls.bound
    bound.class_named = classes.local_or_stand_in
    bound.proxy_class = classes.for_instances
    bound.serve = client_serving.serve
    bound.released = client_objects.drop
    bound.random_states = program_state.after_call
    bound.ship_class = _ship_class
    bound.callable_ref = _callable_ref
    bound.users_path = _users_path
    bound.resend = _resend


def _shipping() -> types.ModuleType:
    from radium_interposer import shipping  # at first use (see the module's docstring)

    return shipping


def _ship_class(cls: type) -> str:
    return _shipping().ship_class(cls)  # type: ignore[no-any-return]


def _callable_ref(obj: Any) -> Optional[Dict[str, Any]]:
    return _shipping().callable_ref(obj)  # type: ignore[no-any-return]


def _users_path(obj: Any) -> Optional[str]:
    return _shipping().users_path(obj)  # type: ignore[no-any-return]


def _resend(module: types.ModuleType, names: List[str]) -> None:
    _shipping().resend(module, names)
