"""Remote errors on the client: the exception tree of the data plane, and how an ERROR answer
becomes the exception the program catches (docs/data-plane.md, "Exceptions")."""

from __future__ import annotations

import collections
import itertools
import os
import sys
import threading
from types import TracebackType
from typing import Any, Dict, Optional

from radium_interposer import codec, reflection, upcalls

__all__ = [
    "LeasePreempted",
    "RemoteError",
    "RemoteTraceback",
    "VersionMismatch",
    "WorkerGone",
    "hide_our_frames",
    "keep",
    "ours",
    "rebuild_error",
    "user_frames",
    "with_remote_traceback",
]


class RemoteError(Exception):
    """An error raised on the worker whose exception type does not exist in this process."""

    def __str__(self) -> str:
        # The text the worker's own class made, when it formats it itself (rebuild_error).
        text = self.__dict__.get("_radium_str")
        return text if isinstance(text, str) else super().__str__()


class WorkerGone(RemoteError):
    """The connection to the lease's worker broke: it crashed, or the lease ended."""


class VersionMismatch(WorkerGone):
    """This node and the acceptor (or this interposer and the node agent) speak no common
    data-plane version. The message names both and says which side to update."""


class LeasePreempted(Exception):
    """The pool took this lease back for another queue. Raised once per connection, at its
    next call; calls still run until the grace period the message names is over, so a program
    that catches it can save its work. Then the worker stops (``WorkerGone``)."""


class RemoteTraceback(Exception):
    """Attached as ``__cause__`` to a remote exception: where it happened on the worker."""

    def __str__(self) -> str:
        return "\n" + str(self.args[0])


def rebuild_error(meta: Dict[str, Any]) -> BaseException:
    """The remote exception as its own type when this process has it, else a RemoteError; an
    exception one of our callbacks raised, as that very object."""
    if "cx" in meta:
        kept = ours(meta["cx"])
        if kept is not None:
            return kept
    module, qualname = str(meta.get("module", "")), str(meta.get("type", "RemoteError"))
    try:
        args = codec.decode(meta.get("args"), [], lambda _: None) or []
    except (ValueError, TypeError, LookupError, RecursionError):  # the error says it in words
        args = [str(meta.get("error", "remote error"))]
    if not isinstance(args, list):
        args = [args]
    remote_tb = str(meta.get("tb", ""))
    kind: Any = sys.modules.get(module)
    package = sys.modules.get(module.partition(".")[0])
    remote = getattr(kind if kind is not None else package, "__radium_remote__", False)
    if remote or module.startswith("radium_shipped."):
        # The class of a remote module (or of the user's shipped code): its stand-in here, the
        # very class `except torch.SomeError` names.
        builtin = meta.get("builtin") or "Exception"
        kind = upcalls.bound.class_named(f"{module}.{qualname}", builtin)
        qualname = ""
    for part in qualname.split(".") if qualname else []:
        kind = reflection.own_attribute(kind, part)  # the class itself: nothing runs here
    if kind in (StopIteration, StopAsyncIteration, SystemExit, KeyboardInterrupt):
        # As themselves, with their code or message: sys.exit(2) in remote code exits with 2.
        own: BaseException = kind(*args)
        return own
    if isinstance(kind, type) and issubclass(kind, Exception):
        try:
            error: BaseException = kind(*args)
        except Exception:
            pass
        else:
            text = _remote_str(meta, type(error).__name__)
            if isinstance(error, RemoteError) and "error" in meta and text != str(error):
                # A stand-in, whose class formats its message itself on the worker (numpy's
                # AxisError from its args): str(e) is the text the worker's class made.
                error.__dict__["_radium_str"] = text
            return with_remote_traceback(error, remote_tb)
    name = qualname.rpartition(".")[2]
    local = type(name, (RemoteError,), {"__module__": module or "radium_interposer"})
    return with_remote_traceback(local(str(meta.get("error", name))), remote_tb)


#: Exceptions of ours the worker was given (a callback's, a ``with`` body's), by token, so
#: that the very object is raised here if it comes back. Bounded: older ones are forgotten.
_kept: collections.OrderedDict[str, BaseException] = collections.OrderedDict()
_KEPT = 32
_tokens = itertools.count(1)
_kept_lock = threading.Lock()


def keep(error: BaseException) -> str:
    """A token for one of our exceptions sent to the worker: raised back, it comes back as
    this very object (:func:`ours`)."""
    token = f"{id(error):x}.{next(_tokens)}"
    with _kept_lock:
        _kept[token] = error
        while len(_kept) > _KEPT:
            _kept.popitem(last=False)
    return token


def ours(token: Any) -> Optional[BaseException]:
    """Our own exception behind a remote error's token, if we still have it."""
    with _kept_lock:
        return _kept.pop(token, None) if isinstance(token, str) else None


def _remote_str(meta: Dict[str, Any], name: str) -> str:
    """``str(e)`` as the worker had it: ERROR's ``error`` is ``"<type name>: <str(e)>"``."""
    text = str(meta.get("error", ""))
    return text[len(name) + 2 :] if text.startswith(f"{name}: ") else text


def with_remote_traceback(error: BaseException, remote_tb: str) -> BaseException:
    """``error`` with where it happened on the worker kept beside its message, never in it (so
    ``str(e)`` and ``e.args`` are the remote ones): a note (Python 3.11+), printed after the
    message, else a ``RemoteTraceback`` as its cause, printed before it."""
    if remote_tb:
        add_note = getattr(error, "add_note", None)
        if add_note is not None:
            add_note(f"\nRemote traceback:\n{remote_tb.rstrip()}")
        else:
            error.__cause__ = RemoteTraceback(remote_tb)
    return error


#: Where the interposer's own modules live: their frames are not the program's.
_OURS = os.path.dirname(os.path.abspath(__file__)) + os.sep


def user_frames(tb: Optional[TracebackType]) -> Optional[TracebackType]:
    """``tb`` without the interposer's frames: where the program's calls went remote, not how
    (proxy, client, wire). Rebuilt, since a traceback is a linked list its entries share."""
    kept = []
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(_OURS):
            kept.append(tb)
        tb = tb.tb_next
    rebuilt = None
    for entry in reversed(kept):
        rebuilt = TracebackType(rebuilt, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return rebuilt


def hide_our_frames() -> None:
    """Print an uncaught exception with the program's frames only, as Python prints one that
    a C extension raised (RADIUM_DEBUG keeps every frame)."""
    if os.environ.get("RADIUM_DEBUG"):
        return
    previous = sys.excepthook

    def hook(kind: Any, value: Any, tb: Optional[TracebackType]) -> None:
        try:
            tb = user_frames(tb)
            if isinstance(value, BaseException):
                value.with_traceback(tb)  # what Python prints from, when it has one
        except Exception:  # never lose the error itself to a fault here
            pass
        previous(kind, value, tb)

    sys.excepthook = hook
