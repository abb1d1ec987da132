"""What a client takes from a worker's word: the references in a worker's value resolve to
what the program itself imported or remoted, never to a local import, to its own callbacks and
objects handed back, or to proxies (docs/data-plane.md, "Values"; :func:`resolver`).

A worker is not trusted with code in its client: a compromised one could plant ``pwnmod.py``
in the program's directory through the client's file service, then name the module in a value.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any, Callable, Dict, Optional

from radium_interposer import callbacks, client_objects, structs, upcalls
from radium_interposer.codec import Resolve
from radium_interposer.tags import CALLBACK, CLASS, CLIENT_OBJECT, MODULE, PATH, SCALAR_VALUE

__all__ = ["MakeProxy", "module_named", "remoted", "resolver"]

#: Makes the proxy of a remote object from its reference tree, its type's name and connection
#: (:func:`radium_interposer.proxy.make`, which this module sits below).
MakeProxy = Callable[[Dict[str, Any], str, Optional[Any]], Any]


def _none_remoted(name: str) -> bool:
    return False


#: Whether a module name is one the program remoted (the finder's: served by the worker, so
#: importing it runs nothing here). Set by :func:`radium_interposer.finder.install`.
remoted: Callable[[str], bool] = _none_remoted


def module_named(name: Any) -> types.ModuleType:
    """The module a worker names (``{"$": "m"}``): one this program imported, or one it
    remoted (imported through the finder, from the worker); DecodeError for any other."""
    module = sys.modules.get(name) if isinstance(name, str) else None
    if module is None and isinstance(name, str) and _remoted_all_the_way(name):
        module = importlib.import_module(name)
    if not isinstance(module, types.ModuleType):
        raise structs.DecodeError(
            f"radium: the worker sent a reference to module {name!r}, which this program has "
            "neither imported nor remoted: refused (a worker may not make it import code)"
        )
    return module


def _remoted_all_the_way(name: str) -> bool:
    """Every package on the way to ``name`` is imported already or remoted, so importing it
    loads nothing from this side's files."""
    parts = name.split(".")
    if not all(part.isidentifier() for part in parts):
        return False
    prefixes = (".".join(parts[:n]) for n in range(1, len(parts) + 1))
    return all(prefix in sys.modules or remoted(prefix) for prefix in prefixes)


def resolver(make: MakeProxy) -> Resolve:
    """How the client resolves each reference in a worker's value (``proxy.decode``): modules
    and classes as above, its own callbacks and objects handed back, a remoted module's
    functions as themselves; any other remote object as the proxy ``make`` makes."""

    def resolve(node: Dict[str, Any]) -> Any:
        tag = node["$"]
        if tag == MODULE:
            return module_named(node.get("n"))
        if tag == CLASS:
            return upcalls.bound.class_named(str(node["p"]), node.get("e") or 0)
        if tag == CALLBACK:  # one of our callables, handed back
            return callbacks.lookup(node.get("id"))
        if tag == CLIENT_OBJECT:  # one of our files or objects, handed back
            return client_objects.lookup(node.get("id"))
        if tag == PATH:  # a worker's function: np.concatenate itself when numpy is remoted
            return _by_path(node, make)
        if tag == SCALAR_VALUE and not _small_scalar(node):  # held here, only ever sent back
            raise structs.DecodeError("a numpy scalar from the worker is not a dtype and its bytes")
        return make(node, str(node.get("t", "")), None)

    return resolve


def _by_path(node: Dict[str, Any], make: MakeProxy) -> Any:
    """A worker's function named by path (``numpy.concatenate``): the very attribute of the
    remoted module this program uses, when it is one, so ``func is np.concatenate`` holds."""
    module, _, name = str(node.get("p", "")).rpartition(".")
    remote = sys.modules.get(module)
    directory = getattr(remote, "__radium_directory__", None)
    remoted = getattr(remote, "__radium_remote__", False) and isinstance(directory, dict)
    if remoted and directory.get(name) == "f":  # type: ignore[union-attr]
        return getattr(remote, name)
    return make(node, "", None)


def _small_scalar(node: Dict[str, Any]) -> bool:
    kind, raw = node.get("dt"), node.get("b")
    return isinstance(kind, str) and len(kind) <= 32 and isinstance(raw, str) and len(raw) <= 512
