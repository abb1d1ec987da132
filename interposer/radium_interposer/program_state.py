"""The program's state as shipped code sees it (docs/remoting.md, "The program's state").

Shipped code runs on the worker but must see the program's state, not the worker's:
- **Random generators.** Once a shipped definition can use the standard library's global
  generator (its globals hold the ``random`` module, one of its functions or a bound method of
  ``random._inst``), or this process's own numpy's legacy one or torch's CPU one (function
  mode from a Python that has them: :mod:`radium_interposer.rng_state`), each call carries the
  generator's state when it changed since the worker last had it (meta ``ps``), and the answer
  carries the worker's when the call changed it (:mod:`radium_interposer.worker_state`). Calls
  stream while only ``random`` is synced: the program's draws here first take the worker's
  state (:mod:`radium_interposer.local_draws`). numpy's and torch's generators are drawn from C
  too (a layer's initialisation, dropout), where no draw can be seen: while one of them is
  synced, calls are not pipelined.
- **Module globals, as they are at each call.** The names a shipped definition uses that were
  missing when it was shipped, and those rebound since (an identity check), are sent again
  before the next call.
"""

from __future__ import annotations

import ast
import builtins
import dis
import itertools
import operator
import random
import sys
import types
import weakref
from typing import Any, Dict, List, Optional, Set, Tuple

from radium_interposer import code_origin, rng_state, upcalls
from radium_interposer.client import Connection
from radium_interposer.tags import PATH

__all__ = [
    "after_call",
    "before_call",
    "bound_method_ref",
    "global_names",
    "holds_calls",
    "kinds",
    "moved",
    "moves",
    "note",
    "refresh",
    "stale",
    "stream_random",
    "syncing",
    "watch",
]

#: The generator kinds synced with the worker (empty: no cost at all).
kinds: Set[str] = set()
#: The kinds whose calls may stream: ``random`` once local_draws guards its module functions.
_streamable: Set[str] = set()
#: Per connection: the state of each kind its worker session had at its last answer.
_known: weakref.WeakKeyDictionary[Connection, Dict[str, Any]] = weakref.WeakKeyDictionary()
#: Connections that sent calls with ``ps`` since their last answer that carried ``ps``: there
#: the worker's generators may be ahead of this process's. A plain set: every draw of the
#: program's from ``random`` tests it (local_draws), and a weak set's test costs 2x the draw.
stale: Set[Connection] = set()
#: ``moved[0]``: a fresh number of ``moves`` each time ``random``'s state may have changed here
#: (local_draws marks each draw, after_call the worker's state applied). A connection whose last
#: read of the state was at the newest mark sends ``null`` without reading it again: reading and
#: comparing 625 numbers took ~13 µs of every call.
moves = itertools.count(1)
moved = [0]
_read_at: weakref.WeakKeyDictionary[Connection, int] = weakref.WeakKeyDictionary()
#: Per shipped client module: each global name shipped code uses, with the value sent (or
#: _MISSING while the module has no such name).
_watched: Dict[str, Dict[str, Any]] = {}
_MISSING = object()
#: Instructions that read or write a global (class bodies and module level use *_NAME).
_GLOBAL_OPS = frozenset(
    ("LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL", "DELETE_GLOBAL", "LOAD_FROM_DICT_OR_GLOBALS")
)
#: The module's own identity, which the worker's namespace keeps (a class body reads
#: ``__name__`` for its ``__module__``): never sent. ``__file__`` is: it names the user's file.
_OWN = frozenset(
    ("__name__", "__module__", "__qualname__", "__doc__", "__spec__", "__loader__",
     "__package__", "__builtins__", "__path__", "__annotations__", "__dict__")
)  # fmt: skip


def global_names(source: str) -> Set[str]:
    """The global names a definition's source reads or writes: from its compiled code and every
    code object in it (decorators, defaults and annotations evaluated at definition time
    included), so a local that shadows a global is not taken for it."""
    try:
        code = compile(source, "<shipped>", "exec", dont_inherit=True)
    except SyntaxError:  # not compilable alone: every name it mentions (a superset)
        return {n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name)} - _OWN
    names: Set[str] = set()
    stack: List[types.CodeType] = [code]
    while stack:
        unit = stack.pop()
        names.update(str(i.argval) for i in dis.get_instructions(unit) if i.opname in _GLOBAL_OPS)
        stack.extend(c for c in unit.co_consts if isinstance(c, types.CodeType))
    return names - _OWN


def note(value: Any, owner: Any) -> None:
    """A global bound for shipped code: the generators it can reach are synced from now on."""
    if _is_random(value):
        kinds.add("random")
    elif _is_numpy_random(value, owner) and rng_state.available("numpy"):
        kinds.add("numpy")
    elif _is_torch(value) and rng_state.available("torch"):
        kinds.add("torch")


def _is_random(value: Any) -> bool:
    """The stdlib random module, a function of it, or a method of its global generator."""
    if value is random or getattr(value, "__self__", None) is getattr(random, "_inst", None):
        return True
    return isinstance(value, types.FunctionType) and value.__module__ == "random"


def _is_torch(value: Any) -> bool:
    """This process's own torch, a module of it or one of its objects (``from torch import
    randn``, ``nn``, a model): most torch code may draw (init, dropout, randn)."""
    if getattr(value, "__radium_remote__", False):
        return False
    name = value.__name__ if isinstance(value, types.ModuleType) else None
    where = name or getattr(value, "__module__", None) or type(value).__module__
    return isinstance(where, str) and where.split(".")[0] == "torch"


def _is_numpy_random(value: Any, owner: Any) -> bool:
    """This process's own numpy (remoted numpy keeps its state on the worker anyway): its
    ``random`` module or functions, or numpy itself where the definition mentions ``random``."""
    name = getattr(value, "__name__", None) if isinstance(value, types.ModuleType) else None
    if name == "numpy.random" or str(getattr(value, "__module__", "")).startswith("numpy.random"):
        return not getattr(value, "__radium_remote__", False)
    if name != "numpy" or getattr(value, "__radium_remote__", False):
        return False
    import inspect  # here: it costs every remoted Python's start milliseconds

    try:
        return "random" in inspect.getsource(owner)
    except (OSError, TypeError):
        return True


def bound_method_ref(obj: Any) -> Optional[Dict[str, Any]]:
    """A library's module-level bound method by path (``from random import shuffle``: the
    worker's ``random.shuffle``, drawing from its generator, which is synced)."""
    if isinstance(obj, types.MethodType) and isinstance(obj.__func__, types.FunctionType):
        if code_origin.is_users(obj.__func__):
            return None
    elif not isinstance(obj, types.BuiltinMethodType) or isinstance(obj.__self__, types.ModuleType):
        return None  # (a builtin function's __self__ is its module: named by callable_ref)
    where = getattr(obj, "__module__", None) or type(obj.__self__).__module__
    module = sys.modules.get(str(where))
    if module is None:
        return None
    found = getattr(module, obj.__name__, None)
    return {"$": PATH, "p": f"{module.__name__}.{obj.__name__}"} if found == obj else None


def watch(module: str, name: str, value: Any = _MISSING) -> None:
    """Shipped code of ``module`` uses global ``name``, sent as ``value`` (or still missing)."""
    if value is _MISSING and hasattr(builtins, name):
        return  # a builtin: the worker has it too
    _watched.setdefault(module, {})[name] = value
    _fast.pop(module, None)


#: Per watched module: (its namespace, a getter of its present watched names' values, the
#: values sent, its missing names): the per-call check is a few C-level operations.
_fast: Dict[str, Tuple[Dict[str, Any], Any, Tuple[Any, ...], Tuple[str, ...]]] = {}


def _unchanged(module_name: str) -> bool:
    """Whether no watched global of the module appeared or was rebound (the common case)."""
    fast = _fast.get(module_name)
    if fast is None:
        module = sys.modules.get(module_name)
        if module is None:
            return True
        names = list(_watched[module_name].items())  # a snapshot: atomic
        present = tuple(name for name, sent in names if sent is not _MISSING)
        sent_values = tuple(sent for _, sent in names if sent is not _MISSING)
        # itemgetter of one name gives the value, not a 1-tuple: a list of getters then.
        get: Any = operator.itemgetter(*present) if len(present) > 1 else present
        missing = tuple(name for name, sent in names if sent is _MISSING)
        fast = _fast[module_name] = (vars(module), get, sent_values, missing)
    namespace, get, sent_values, missing = fast
    try:
        values = get(namespace) if callable(get) else [namespace[name] for name in get]
    except KeyError:  # one was deleted
        return False
    same = all(map(operator.is_, values, sent_values))
    return same and not any(name in namespace for name in missing)


def syncing() -> bool:
    """Whether calls carry the program's generator states."""
    return bool(kinds)


def holds_calls() -> bool:
    """Whether calls must wait for their answers: a synced generator can be drawn from here
    without the draw being seen first (numpy's or torch's)."""
    return not kinds <= _streamable


def stream_random() -> None:
    """The program's draws from ``random`` are guarded (local_draws): its calls may stream."""
    _streamable.add("random")


def before_call(conn: Connection, meta: Dict[str, Any]) -> None:
    """Before a call that may run shipped code: globals sent again where they changed, and the
    generator states the worker needs (``ps``)."""
    if _watched:
        refresh()
    if not kinds:
        return
    known = _known.setdefault(conn, {})
    states: Dict[str, Any] = {}
    for kind in tuple(kinds):  # another thread may add one
        seen = kind in _streamable  # its changes here are marked (moved)
        mark = moved[0]  # before the read: a draw meanwhile leaves a newer mark
        if seen and kind in known and _read_at.get(conn) == mark:
            states[kind] = None  # nothing moved it here since this connection's last read
            continue
        current = rng_state.get(kind)
        states[kind] = None if known.get(kind) == current else rng_state.dump(kind, current)
        known[kind] = current
        if seen:
            _read_at[conn] = mark
    meta["ps"] = states
    stale.add(conn)


def after_call(conn: Connection, states: Any) -> None:
    """An answer's ``ps``: the worker's generator states after the call, applied here. Checked
    first: nothing the worker sends may do more than set a generator's state."""
    if not isinstance(states, dict):
        return
    stale.discard(conn)
    known = _known.setdefault(conn, {})
    for kind, tree in states.items():
        if kind in kinds:
            known[kind] = rng_state.load(kind, tree)
            rng_state.put(kind, known[kind])
            if kind in _streamable:  # moved here: the other connections read it again
                moved[0] = _read_at[conn] = next(moves)


def refresh() -> None:
    """Send again the watched globals that appeared or were rebound since they were sent."""
    for module_name, names in list(_watched.items()):
        module = sys.modules.get(module_name)
        if module is None or _unchanged(module_name):
            continue
        _fast.pop(module_name, None)
        namespace = vars(module)
        # A snapshot (atomic): another thread's shipping may add names meanwhile.
        watched = list(names.items())
        changed = [name for name, sent in watched if namespace.get(name, _MISSING) is not sent]
        if changed:
            for name in changed:
                names[name] = namespace.get(name, _MISSING)  # now current, sent or not
            upcalls.bound.resend(module, [name for name in changed if name in namespace])
