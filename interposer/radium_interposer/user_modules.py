"""The program's own modules on the worker (docs/remoting.md, "Your modules").

Shipped code that refers to a module of the program (``import data, model`` beside
``main.py``, a package ``pkg`` with ``pkg/util.py``) needs that module on the worker. A module
is the program's own when this process loaded it from a source file outside the standard
library and the installed packages (the rule :func:`shipped_paths.is_users` applies to classes and
functions), and it is not ``__main__`` (whose top level must not run twice).

Before any shipped code refers to one of them, this process sends the worker the source of
*every* module of its own it has loaded so far (once each, per process; those loaded later go
with the next shipping): operation ``define`` with ``mods``. The worker only registers them; a
module runs there when something there imports it (the shipped code's reference, or one module
of the program importing another), under its own name, so ``import helpers`` inside ``data.py``
and ``from . import util`` inside ``pkg/__init__.py`` find theirs. Nothing is asked of this
process: it sends only modules it already has, and never imports on the worker's word.

A function or class of such a module is named by its import path (``data.load``,
``model.Net``), not shipped alone: the code on the worker shares its module's state exactly as
it does here.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import sys
import threading
import types
from typing import Any, Dict, List, Optional, Tuple

from radium_interposer import codec, ops, proxy
from radium_interposer.client import state
from radium_interposer.errors import WorkerGone
from radium_interposer.tags import DICT

__all__ = ["import_path", "own", "refer", "refresh", "sync"]

#: The interpreter's start-up hooks: loaded from outside site-packages, never the program's.
_HOOKS = frozenset(("__main__", "sitecustomize", "usercustomize"))
#: The modules sent to the worker by this process: name -> id of the module object sent.
_sent: Dict[str, int] = {}
#: Modules looked at and found not to be the program's own (name -> id of the module).
_foreign: Dict[str, int] = {}
_lock = threading.RLock()


def own(module: Any, libraries: Tuple[str, ...]) -> Optional[Tuple[str, bool]]:
    """``(file, is_package)`` of a module this process loaded from the program's own source
    file (a namespace package: an empty file name), else None."""
    spec = getattr(module, "__spec__", None)
    name = getattr(module, "__name__", None)
    if (
        not isinstance(module, types.ModuleType)
        or getattr(module, "__radium_remote__", False)  # the worker's, described here
        or spec is None
        or name in _HOOKS
        or spec.name != name
    ):
        return None
    package = spec.submodule_search_locations is not None
    if spec.origin is None and package:  # a namespace package: a folder without __init__.py
        folders = list(spec.submodule_search_locations or [])
        mine = bool(folders) and not any(str(f).startswith(libraries) for f in folders)
        return ("", True) if mine else None
    origin = spec.origin
    if not isinstance(spec.loader, importlib.machinery.SourceFileLoader) or not origin:
        return None  # builtin, frozen, extension or zipped: nothing to send, or not ours
    return None if str(origin).startswith(libraries) else (str(origin), package)


#: Module sources per ``define`` frame: a frame carries at most 64 buffers, and the module's
#: values may add a few (``_values``).
_PER_FRAME = 48


def refer(module: Optional[types.ModuleType]) -> None:
    """Before shipped code refers to ``module``: the program's modules are on the worker, and
    when ``module`` is one of them, its values are this program's (:func:`_values`)."""
    from radium_interposer import code_origin  # shipping imports this module

    with _lock:
        libraries = code_origin.libraries()
        mods: List[Dict[str, Any]] = []
        buffers: List[Any] = []
        for name, loaded in list(sys.modules.items()):
            if _sent.get(name) == id(loaded) or _foreign.get(name) == id(loaded):
                continue
            found = own(loaded, libraries)
            source = _read(found[0]) if found is not None else None
            if found is None or source is None:
                _foreign[name] = id(loaded)
                continue
            if len(buffers) == _PER_FRAME:  # a frame holds at most 64 buffers (the wire's)
                state.connection().request({"op": ops.DEFINE, "mods": mods}, buffers)
                mods, buffers = [], []
            mods.append({"m": name, "file": found[0], "pkg": found[1], "s": len(buffers)})
            buffers.append(source)
            _sent[name] = id(loaded)
        if module is not None and _sent.get(module.__name__) == id(module):
            values = _values(module, buffers)
            if values is not None:
                mods.append({"m": module.__name__, "g": values})
        if mods:
            state.connection().request({"op": ops.DEFINE, "mods": mods}, buffers)


def sync() -> None:
    """Send the worker every module of the program's own loaded here and not yet sent."""
    refer(None)


#: Per module whose values were sent: each global's digest as last sent.
_values_sent: Dict[str, Dict[str, str]] = {}


def refresh() -> None:
    """Before a call of the program's remoted function: the values of the modules shipped code
    refers to, sent again where the program changed them since."""
    with _lock:
        buffers: List[Any] = []
        mods: List[Dict[str, Any]] = []
        for name in list(_values_sent):
            module = sys.modules.get(name)
            values = _values(module, buffers) if module is not None else None
            if values is not None and module is not None and _sent.get(name) == id(module):
                mods.append({"m": name, "g": values})
        if mods:
            state.connection().request({"op": ops.DEFINE, "mods": mods}, buffers)


def _values(module: types.ModuleType, buffers: List[Any]) -> Optional[Dict[str, Any]]:
    """The module's globals that hold plain values (numbers, strings, containers of them) or
    remote objects and changed since last sent (all, the first time), as a tree; None when
    none did. On the worker they replace what its run of the module's source made:
    ``config.lr = 0.1`` set by the program is seen there, and a model its top level made is
    the program's, not a twin. One the program left alone keeps what the worker made of it."""
    sent = _values_sent.setdefault(module.__name__, {})
    keys: List[str] = []
    trees: List[Any] = []
    for name, value in list(vars(module).items()):
        if name.startswith("__") or not _value_like(value, 3):
            continue
        start = len(buffers)
        try:
            tree = codec.encode(value, buffers, proxy.reference)
        except codec.EncodeError:
            del buffers[start:]
            continue
        digest = hashlib.sha256(repr(tree).encode())
        for buffer in buffers[start:]:
            digest.update(bytes(buffer))
        if sent.get(name) == digest.hexdigest():
            del buffers[start:]
            continue
        sent[name] = digest.hexdigest()
        keys.append(name)
        trees.append(tree)
    return {"$": DICT, "k": keys, "v": trees} if keys else None


def _value_like(value: Any, depth: int) -> bool:
    if value is None or type(value) in (bool, int, float, complex, str, bytes):
        return True
    if isinstance(value, proxy.Remote):
        return True
    if depth > 0 and type(value) in (list, tuple, set, frozenset):
        return all(_value_like(item, depth - 1) for item in value)
    if depth > 0 and type(value) is dict:
        return all(_value_like(k, 0) and _value_like(v, depth - 1) for k, v in value.items())
    return False


def _read(path: str) -> Optional[bytes]:
    if not path:
        return b""  # a namespace package has no source
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:  # gone since it was imported: the worker cannot have it either
        return None


def import_path(obj: Any) -> Optional[str]:
    """``module.qualname`` of a function or class of one of the program's own modules other
    than ``__main__``, once that module is on the worker; None for anything else."""
    from radium_interposer import code_origin  # shipping imports this module

    name = getattr(obj, "__module__", None)
    module = sys.modules.get(name or "")
    qualname = getattr(obj, "__qualname__", "")
    if module is None or "<locals>" in qualname or own(module, code_origin.libraries()) is None:
        return None
    if not _leads_to(module, qualname, obj):
        return None
    refer(module)
    return f"{name}.{qualname}" if _runs_there(module.__name__) else None


#: Whether each module of the program imports on the worker (asked once).
_importable: Dict[str, bool] = {}


def _runs_there(name: str) -> bool:
    """Whether the worker imports the program's module ``name``. One that cannot (it imports
    a package only this side has, ``tqdm`` for a progress bar) still has its functions and
    classes shipped alone, by source, as before the module could be."""
    known = _importable.get(name)
    if known is None:
        try:
            proxy.request(ops.IMPORT, m=name)
            known = True
        except WorkerGone:
            raise
        except Exception:  # the module's own error, raised by its top level there
            known = False
        _importable[name] = known
    return known


def _leads_to(module: types.ModuleType, qualname: str, obj: Any) -> bool:
    """Whether ``qualname`` leads from the module back to ``obj`` here, read from namespaces
    only (a class on remote bases keeps no body here: the worker's copy of it has the rest)."""
    from radium_interposer import classes

    found: Any = module
    for part in qualname.split("."):
        if isinstance(found, classes.RemoteType) and part not in vars(found):
            return bool(found.__module__ == module.__name__)  # ours: its body runs there
        if not isinstance(found, (type, types.ModuleType)):
            return False
        found = vars(found).get(part)
        found = getattr(found, "__func__", found)  # a staticmethod or classmethod in a class
    return found is obj or getattr(found, "__wrapped__", None) is obj  # or its split stand-in
