"""The exception of a ``with`` body, crossing to a remote context manager's ``__exit__``.

``with np.testing.assert_raises(ValueError): f()``: the manager lives on the worker, so its
``__exit__`` must see the body's exception there, and whether it suppressed it must decide here,
as locally. The exception's class crosses by path (builtins by theirs, stand-ins by their remote
path, the user's own classes shipped) and the exception as a value of that class rebuilt on the
worker from its args: an ``ex`` node (docs/data-plane.md, "Values"). Only the client sends one;
the client never decodes one (the worker has no reason to send it). Semantics:
docs/remoting.md.
"""

from __future__ import annotations

import sys
import threading
from types import FrameType
from typing import Any, Callable, Dict, List, Optional

from radium_interposer import codec, errors, guarded, instructions
from radium_interposer.tags import ATTRIBUTE, EXCEPTION, PATH

__all__ = [
    "MAX_TEXT",
    "Tree",
    "clean_exit",
    "enter_remote",
    "exit_remote",
    "local",
    "nameable",
    "node",
    "rebuild",
]

Tree = Any
#: The text that stands in for args that cannot cross: at most this many characters.
MAX_TEXT = 1 << 16
#: The client's: per thread, the first call id of each remote ``with`` body now running.
_bodies = threading.local()
#: The worker's threads' state (the worker sets it): the running connection, ``session``.
local: Optional[threading.local] = None
_CLEAN_EXIT = {"$": PATH, "p": "radium_interposer.exits.clean_exit"}
#: The proxy module's name: it imports this one, so it is looked up when a ``with`` needs it.
_PROXY = "radium_interposer.proxy"
#: The instruction that calls ``__enter__`` (3.11+, and 3.9-3.10), and the one after it that
#: drops its result (``with cm:``, no ``as``).
_ENTERS = ("BEFORE_WITH", "SETUP_WITH")


def enter_remote(ref: Dict[str, Any]) -> Any:
    """Run the remote manager's ``__enter__``; the calls made from now on are its body's."""
    proxy = sys.modules[_PROXY]
    # ``with torch.no_grad():`` drops what __enter__ returns: the enter is streamed then, as a
    # call that returns nothing (an error of it is raised at the next sync point).
    frame = guarded.program_frame()
    discard = _drops_result(frame)
    tree = {"$": ATTRIBUTE, "o": ref, "n": "__enter__"}
    entered = proxy.invoke(tree, (), {}, "with|__enter__", discard, discard=discard)
    guarded.entered(frame)  # its body's calls keep pipelining: failures reach the exit below
    _starts().append(proxy.state.new_id())  # ids only grow: the body's calls have larger ones
    return entered


def exit_remote(manager: Any, kind: Any, value: Any, traceback: Any) -> bool:
    """Run the remote ``manager``'s (a proxy's) ``__exit__`` with the body's exception (its
    traceback stays here: it is this process's frames); True when the manager suppressed it.

    A body that raised nothing here may still have failed there: a pipelined call raises at
    the next use of its result, and a ``with`` body's result is often never used
    (``with assert_raises(ValueError): a.reshape(4, 4)``). The exit then runs on the worker
    through :func:`clean_exit`, which gives the manager the first such failure, in the same
    round trip."""
    proxy = sys.modules[_PROXY]
    starts = _starts()
    start = starts.pop() if starts else None
    guarded.left()
    if kind is None and start is not None:
        # Nothing was raised here, so what the exit returns does not matter: it is streamed
        # (a binary record: the manager is a handle), and a body's error it does not
        # suppress is raised at the next sync point.
        args = (manager, start)
        answer = proxy.invoke(_CLEAN_EXIT, args, {}, "with|__exit__", True, discard=True)
    else:
        method = {"$": ATTRIBUTE, "o": object.__getattribute__(manager, "_rd_ref"), "n": "__exit__"}
        sent = nameable(kind) if isinstance(kind, type) else None
        answer = proxy.invoke(method, (sent, value, None), {}, "", False)
    return bool(answer)


def _drops_result(frame: Optional[FrameType]) -> bool:
    """Whether the program's ``frame``, entering a ``with``, drops what ``__enter__`` returns."""
    if frame is None:
        return False
    now = instructions.instruction(frame)
    return now is not None and now[0] in _ENTERS and now[2] == "POP_TOP"


def _starts() -> List[int]:
    starts: Optional[List[int]] = getattr(_bodies, "starts", None)
    if starts is None:
        starts = _bodies.starts = []
    return starts


def clean_exit(manager: Any, start: int) -> Any:
    """On the worker: ``manager.__exit__`` after a body that raised nothing on the client.
    The first of the body's pipelined calls that raised (on this connection, from call id
    ``start`` on) is the body's exception, as it would have been locally: raised again unless
    the manager suppresses it."""
    exit = manager.__exit__
    session = getattr(local, "session", None)
    failures = [e for r, e in getattr(session, "failed", ()) if isinstance(r, int) and r >= start]
    if not failures:
        return exit(None, None, None)
    error = failures[0]
    if exit(type(error), error, error.__traceback__):
        return True
    raise error


def nameable(kind: type) -> type:
    """``kind``, or its nearest base the worker can be told about: a class without an import
    path (one made inside a function) crosses as the class it derives from."""
    for base in kind.__mro__:
        if codec.class_ref(base) is not None:
            return base
    return BaseException


def node(error: BaseException, encode: Callable[[Any], Tree]) -> Tree:
    """The codec's hook on the client: ``error`` as an ``ex`` node. Its args cross as values
    when they can, else its text; a token lets the client raise this very object again if the
    worker raises it back (as the manager of ``contextlib.contextmanager`` does)."""
    tree: Dict[str, Any] = {"$": EXCEPTION, "t": encode(nameable(type(error)))}
    try:
        tree["a"] = encode(list(error.args))
    except (TypeError, ValueError):  # EncodeError is a TypeError
        tree["s"] = str(error)[:MAX_TEXT]
    tree["cx"] = errors.keep(error)
    return tree


def rebuild(tree: Dict[str, Any], decode: Callable[[Any], Any]) -> BaseException:
    """An ``ex`` node on the worker: an exception of its class, made from its args (or text)."""
    kind = decode(tree.get("t"))
    if not (isinstance(kind, type) and issubclass(kind, BaseException)):
        raise codec.DecodeError("an exception value needs an exception class")
    args = decode(tree["a"]) if "a" in tree else [str(tree.get("s", ""))]
    if not isinstance(args, list):
        raise codec.DecodeError("an exception value's args must be a list")
    error = _made(kind, args)
    token: Optional[Any] = tree.get("cx")
    if isinstance(token, str):  # raised back to the client, it is the client's own object
        error.radium_client_token = token  # type: ignore[attr-defined]
    return error


def _made(kind: type, args: list) -> BaseException:  # type: ignore[type-arg]
    try:
        error = kind(*args)
    except Exception:
        try:  # a class whose __init__ wants other arguments than its args: made without it
            error = kind.__new__(kind, *args)
        except Exception as exc:
            raise codec.DecodeError(f"cannot make a {kind.__qualname__} from {args!r}") from exc
    if not isinstance(error, BaseException):
        raise codec.DecodeError(f"{kind.__qualname__} made no exception")
    return error
