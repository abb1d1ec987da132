"""The client's side of warnings: the warnings a remote call raised on the worker, raised again
here through ``warnings.warn_explicit``, so the program's own filters decide: shown once per
location, always, recorded (``catch_warnings(record=True)``, ``pytest.warns``), ignored, or
raised as the call's exception (``simplefilter("error")``). Semantics: docs/remoting.md,
"Warnings"; wire: docs/data-plane.md, "Output" (``w``); the worker's side: worker_warnings.

Nothing the worker sends runs code here: the category is a class this program has (a builtin, a
class of a module it imported) or the stand-in of the remote class, always a ``Warning``; the
text, the location and the count are bounded. What an answer printed (``out``, ``err``) is
written here too (:func:`forward_output`), in order with its warnings.
"""

from __future__ import annotations

import builtins
import contextlib
import linecache
import os
import re
import sys
import threading
import warnings
from types import FrameType
from typing import Any, Dict, List, Optional, Set, Tuple

from radium_interposer import codec, reflection, upcalls, wire
from radium_interposer.errors import rebuild_error

__all__ = [
    "ACTIONS",
    "MAX_ENTRIES",
    "MAX_FILES",
    "MAX_LINENO",
    "MAX_PIPELINED",
    "MAX_REPEATS",
    "MAX_TEXT",
    "STREAMED_AT",
    "Where",
    "forward",
    "forward_output",
    "import_filters",
    "learn",
    "note_streamed",
    "pipelined",
    "raise_pending",
    "sites",
]

#: Warnings replayed per answer, characters of a text, repeats of one warning, at most.
MAX_ENTRIES = 256
MAX_TEXT = 1 << 16
MAX_REPEATS = 1024
#: Remote files whose once-per-location registries (and source lines) are kept.
MAX_FILES = 1024
MAX_LINENO = 1 << 16
_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")
#: Where the interposer's own code is: the program's frame is the first one outside it.
_OURS = os.path.dirname(os.path.abspath(__file__)) + os.sep
#: The registries of remote files (the program's own files use their module's, as locally).
_registries: Dict[str, Dict[Any, Any]] = {}
_seeded: Dict[str, List[str]] = {}
_pending = threading.local()
#: Call sites whose calls raised warnings: they wait for their answer (not pipelined), so
#: their warnings are raised at the program's line of the call, as locally.
sites: Set[str] = set()
Where = Tuple[str, int, Optional[str], Optional[Dict[str, Any]]]
#: The call site and the program's place of recent pipelined calls, by result id: their
#: warnings and errors arrive with a later answer (tagged ``r``) and are raised at their own
#: line. A ring indexed by the id's low bits (ids are consecutive): one store per call, where a
#: dictionary dropping its oldest entry cost a microsecond.
MAX_PIPELINED = 4096
_ring: List[Optional[Tuple[int, str, Any]]] = [None] * MAX_PIPELINED


def pipelined(result_id: int, site: str, frame: Optional[FrameType] = None) -> None:
    """A pipelined call was sent from the program's ``frame`` (found now if not given)."""
    if frame is None:
        noted: Any = _program_frame()
    else:  # its line is worked out only if a warning comes (f_lineno costs a microsecond)
        noted = (frame.f_code, frame.f_lasti, frame.f_globals)
    _ring[result_id % MAX_PIPELINED] = (result_id, site, noted)


def _noted(result_id: Any) -> Optional[Tuple[str, Any]]:
    """What :func:`pipelined` noted of the call ``result_id`` (a worker's word), if it still
    holds it."""
    if type(result_id) is not int:
        return None
    entry = _ring[result_id % MAX_PIPELINED]
    return (entry[1], entry[2]) if entry is not None and entry[0] == result_id else None


#: The attribute of an error raised by a streamed call, reported at a later sync point: where
#: the call was made ("file:line").
STREAMED_AT = "radium_streamed_at"


def note_streamed(error: BaseException, result_id: Any) -> None:
    """An error of the streamed call ``result_id``, reported at the program's next sync point:
    it says where that call was made, as an asynchronous GPU error's report does."""
    noted = _noted(result_id)
    place = "an earlier line"
    if noted is not None:
        filename, line, _, _ = _where(noted[1])
        place = f"{filename}:{line}"
    with contextlib.suppress(AttributeError, TypeError):  # a class with __slots__
        setattr(error, STREAMED_AT, place)
    if hasattr(error, "add_note"):  # Python 3.11+
        error.add_note(f"radium: raised by the streamed call at {place}, reported here")


def learn(site: str) -> None:
    """After a call's answer: its site warned (at the call), so its later calls wait."""
    if getattr(_pending, "at_call", False):
        _pending.at_call = False
        sites.add(site)


def forward(meta: Dict[str, Any]) -> None:
    """An answer's output with its warnings (``w``), each replayed at its place in the stderr
    the call wrote. A warning the filters turn into an exception is raised by
    :func:`raise_pending` once the answer is handled."""
    out, err = meta.get("out"), meta.get("err")
    if isinstance(out, str) and out:
        sys.stdout.write(out)
        sys.stdout.flush()
    text = err if isinstance(err, str) else ""
    entries = meta.get("w")
    done = 0
    for item in entries[:MAX_ENTRIES] if isinstance(entries, list) else []:
        if not isinstance(item, dict):
            continue
        offset = item.get("o")
        if isinstance(offset, int) and done < offset <= len(text):
            sys.stderr.write(text[done:offset])
            done = offset
        _replay(item)
    if done < len(text):
        sys.stderr.write(text[done:])
    left = _count(entries) - min(MAX_ENTRIES, len(entries) if isinstance(entries, list) else 0)
    if left > 0:
        sys.stderr.write(f"radium: {left} more warnings of a remote call were not replayed\n")
    sys.stderr.flush()


def raise_pending(frame: wire.Frame) -> None:
    """Raise the first warning the program's filters turned into an exception, if any: what
    the call raises, as locally (its own error, if it also failed later, is its context)."""
    error: Optional[BaseException] = getattr(_pending, "error", None)
    if error is None:
        return
    _pending.error = None
    if frame.type == wire.ERROR:
        error.__context__ = rebuild_error(frame.meta)
    raise error


def _count(entries: Any) -> int:
    """How many warnings the answer stands for (listed ones, and those only counted: ``d``)."""
    if not isinstance(entries, list):
        return 0
    extra = [e.get("d") for e in entries[:MAX_ENTRIES] if isinstance(e, dict)]
    return len(entries) + sum(d for d in extra if isinstance(d, int) and d > 0)


def _replay(item: Dict[str, Any]) -> None:
    category = _category(item.get("c"), item.get("e"))
    message = str(item.get("m", ""))[:MAX_TEXT]
    lineno = item.get("l")
    lineno = lineno if isinstance(lineno, int) and 0 <= lineno < 1 << 31 else 0
    filename, module_name = item.get("f"), item.get("g")
    globals_: Optional[Dict[str, Any]] = None
    if isinstance(filename, str) and filename:
        filename = filename[:4096]
        module = module_name if isinstance(module_name, str) and len(module_name) < 512 else None
        if module is None:  # as warnings names it from the file (None would show nothing)
            module = filename[:-3] if filename.lower().endswith(".py") else filename
        registry = _registry(filename)
        _seed(filename, lineno, item.get("s"))
    else:  # at the program's line that made the call: its module's registry, as locally
        late = _noted(item.get("r")) if "r" in item else None
        if late is not None:  # a pipelined call's: at its line, and its site waits from now on
            sites.add(late[0])
            filename, lineno, module, globals_ = _where(late[1])
        else:
            filename, lineno, module, globals_ = _program_frame()
            _pending.at_call = True
        registry = globals_.setdefault("__warningregistry__", {}) if globals_ else {}
    times = item.get("n")
    for _ in range(min(times, MAX_REPEATS) if isinstance(times, int) and times > 0 else 1):
        try:
            warnings.warn_explicit(message, category, filename, lineno, module, registry, globals_)
        except Exception as exc:  # the filter "error": the first one is the call's exception
            if getattr(_pending, "error", None) is None:
                _pending.error = exc.with_traceback(None)
            return


def _category(path: Any, builtin: Any) -> type:
    """The warning's class here: the program's own, else the remote class's stand-in (what
    ``pytest.warns(np.exceptions.RankWarning)`` names); never anything but a Warning."""
    base = getattr(builtins, builtin, None) if isinstance(builtin, str) else None
    if not (isinstance(base, type) and issubclass(base, Warning)):
        base = UserWarning
    if not isinstance(path, str) or len(path) > 512 or not _PATH.match(path):
        return base
    if path.startswith("radium_shipped."):  # the program's own class, shipped: its own here
        path = path[len("radium_shipped.") :]
    module = sys.modules.get(path.rpartition(".")[0])
    if module is not None and not reflection.remote_module(module):
        found: Any = codec.find_class(path)  # a module of this program's: its class, or none
    else:
        found = upcalls.bound.class_named(path, base.__name__)
    return found if isinstance(found, type) and issubclass(found, Warning) else base


def _registry(filename: str) -> Dict[Any, Any]:
    registry = _registries.get(filename)
    if registry is None:
        registry = {} if len(_registries) < MAX_FILES else _registries.setdefault("", {})
        _registries[filename] = registry
    return registry


def _seed(filename: str, lineno: int, line: Any) -> None:
    """The worker's source line, for a file this side lacks (printed under the warning as
    locally); kept as linecache keeps a module loader's source (never checked on disk)."""
    if not isinstance(line, str) or not 0 < lineno <= MAX_LINENO or os.path.exists(filename):
        return
    lines = _seeded.get(filename)
    if lines is None:
        if len(_seeded) >= MAX_FILES or (filename in linecache.cache):
            return
        lines = _seeded[filename] = []
    lines.extend("\n" for _ in range(lineno - len(lines)))
    lines[lineno - 1] = line[:MAX_TEXT].rstrip("\n") + "\n"
    linecache.cache[filename] = (sum(map(len, lines)), None, lines, filename)


def _where(noted: Any) -> Where:
    """A pipelined call's place, from what :func:`pipelined` noted (code, offset, globals)."""
    if len(noted) == 4:
        return noted  # type: ignore[no-any-return]
    code, offset, globals_ = noted
    line = next((ln for start, end, ln in code.co_lines() if start <= offset < end), None)
    return code.co_filename, line or code.co_firstlineno, str(globals_.get("__name__")), globals_


def _program_frame(frame: Optional[FrameType] = None) -> Where:
    """Where the program made the remote call: its first frame outside the interposer."""
    if frame is None:
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename.startswith(_OURS):
            frame = frame.f_back
    if frame is None:
        return "sys", 1, "sys", None  # what warnings.warn says when there is no frame
    name = frame.f_globals.get("__name__")
    return frame.f_code.co_filename, frame.f_lineno, str(name), frame.f_globals


def import_filters(entries: Any) -> None:
    """The filters a remoted package installs for its own warnings when imported
    (worker_warnings.filters_of), put in front as its local import would."""
    for item in reversed(entries[:16] if isinstance(entries, list) else []):
        if isinstance(item, list) and len(item) == 3 and item[0] in ACTIONS:
            warnings.filterwarnings(item[0], category=_category(item[1], item[2]))


ACTIONS = ("default", "error", "ignore", "always", "module", "once")


def forward_output(meta: Dict[str, Any]) -> None:
    """Write what a remote call printed (or warned) here, where the program would have."""
    if "w" in meta:  # warnings, each replayed at its place in the call's stderr
        forward(meta)
        return
    if "out" not in meta and "err" not in meta:  # most answers: nothing printed
        return
    for key, stream in (("out", sys.stdout), ("err", sys.stderr)):
        text = meta.get(key)
        if text and isinstance(text, str):
            stream.write(text)
            stream.flush()
