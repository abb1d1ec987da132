"""Where the user's shipped classes and functions are on the worker: the paths shipping learned
as it sent them (:mod:`radium_interposer.shipping`), and whether a definition still has to go.
A class on remote bases carries its path itself, as a stand-in does from the start.
"""

from __future__ import annotations

import weakref
from typing import Any, Optional

from radium_interposer import classes, code_origin

__all__ = ["is_users", "known", "remember"]

#: The worker path of each shipped user class or function (by identity, not kept alive).
_shipped: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def known(obj: Any) -> Optional[str]:
    """The worker path of a stand-in or of a shipped class or function; None: not there yet."""
    if isinstance(obj, type) and classes.path_of(obj) is not None:
        return classes.path_of(obj)
    return _shipped.get(obj)


def is_users(obj: Any) -> bool:
    """A class or function of the user's own code not yet shipped (code_origin.is_users; a
    class on remote bases until it has its worker path, which stand-ins have from the start)."""
    if isinstance(obj, classes.RemoteType):
        return classes.path_of(obj) is None
    return code_origin.is_users(obj)


def remember(obj: Any, path: str, known_as: str) -> None:
    """``obj`` is at ``path`` on the worker, and its instances' type is named ``known_as``."""
    _shipped[obj] = path
    if isinstance(obj, classes.RemoteType):
        obj.__radium_path__ = path  # type: ignore[attr-defined]
        classes.register(path, obj)
        classes.register(known_as, obj)
    # Defined there by its body (a plain outer class's too): objects of them made there are
    # instances of the program's nested classes here.
    for name, inner in classes.inner_classes(obj) if isinstance(obj, type) else ():
        if known(inner) is None:
            remember(inner, f"{path}.{name}", f"{known_as}.{name}")
