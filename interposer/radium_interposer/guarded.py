"""Whether the program makes a call where an error must surface at once: then the call is
not pipelined.

A pipelined call's error (and its warnings) surface at the next use of its result. Inside a
``try`` body that use is often past the handler (``try: return np.linalg.inv(m)`` /
``except LinAlgError:``), and inside the body of a local ``with`` past its exit
(``with pytest.raises(...)``, ``with warnings.catch_warnings(record=True)``): the handler or
manager would never see what it is written for. A call made there waits for its answer
instead, as locally; not in the body of a ``with open(...)`` (:mod:`files_opened`), whose
exit sees nothing. The body of a *remote* ``with`` (``torch.no_grad()``, ``np.errstate``)
keeps pipelining: its manager gets the body's failed calls at its exit
(:mod:`radium_interposer.exits`), which tells this module where it was entered.

Python 3.11+ code objects say which instructions a handler covers (``co_exceptiontable``);
on older Pythons every call site stays pipelined (docs/remoting.md, "Chains are pipelined").
"""

from __future__ import annotations

import dis
import os
import sys
import threading
from types import CodeType, FrameType
from typing import Dict, List, Optional, Tuple, Union

from radium_interposer import files_opened

__all__ = ["entered", "in_try", "left", "program_frame"]

_HERE = os.path.dirname(__file__)
#: The interposer's own source files, by the names its code objects carry (a set: cheaper per
#: frame than a prefix test, and this runs at every streamed call).
_OURS = frozenset(
    os.path.join(where, name)
    for where in {_HERE, os.path.abspath(_HERE)}
    for name in os.listdir(_HERE)
    if name.endswith(".py")
)
#: An exception table entry: its range, its handler, and its kind: TRY, PASS (a cleanup that
#: hands the exception on from its handler's code), or a ``with``'s: where it was entered.
Entry = Tuple[int, int, int, int]
#: in_try's answer for an instruction, or the ``with`` statements it depends on (_chain).
Chain = Union[bool, Tuple[Tuple[Tuple[int, Optional[str]], ...], bool]]
TRY, PASS = -1, -2
#: Per thread, the remote ``with`` statements now open: (frame id, entering instruction).
_open = threading.local()
#: How many handlers deep a call is followed out (deeper is taken as inside a ``try``).
_NESTING = 16
#: Each code object's exception table, read once, by the code's id (with the code itself, so
#: the id is not reused): it holds the program's code objects, which its functions hold anyway.
#: With it, in_try's chains by offset (_chain), and the ``with`` statements of a file of
#: ``open``: by their BEFORE_WITH, how ``open`` is loaded.
_tables: Dict[int, Tuple[CodeType, Tuple[Entry, ...], Dict[int, Chain], Dict[int, str]]] = {}
_SUPPORTED = sys.version_info >= (3, 11)


def entered(frame: Optional[FrameType]) -> None:
    """A remote context manager was entered by the program's ``frame`` (:func:`program_frame`)
    making a ``with`` (called by exits)."""
    if frame is not None:
        _opened().append((id(frame), frame.f_lasti))


def left() -> None:
    """The innermost remote ``with`` of this thread is being left."""
    opened = _opened()
    if opened:
        opened.pop()


def in_try(frame: Optional[FrameType]) -> bool:
    """Whether the program's ``frame`` (:func:`program_frame`) is making its call inside a
    ``try`` body or the body of a local ``with`` (also through handlers and remote ``with``
    bodies nested in them)."""
    if frame is None or not _SUPPORTED:
        return False
    code = frame.f_code
    known = _tables.get(id(code))  # by id: hashing a code object hashes all of its bytecode
    if known is None or known[0] is not code:
        entries, files = _read(code)
        known = _tables[id(code)] = (code, entries, {}, files)
    if not known[1]:
        return False
    chain = known[2].get(frame.f_lasti)
    if chain is None:
        chain = known[2][frame.f_lasti] = _chain(known[1], known[3], frame.f_lasti)
    if type(chain) is bool:  # no ``with`` on the way: the same at every call from here
        return chain
    withs, end = chain
    opened, here = _opened(), id(frame)
    for entered_at, opener in withs:
        # A file's exit sees nothing, as a remote one's: only a local manager's body waits.
        local = opener is None or not files_opened.opens_a_file(frame, opener)
        if local and (here, entered_at) not in opened:
            return True
    return end


def _chain(entries: Tuple[Entry, ...], files: Dict[int, str], offset: int) -> Chain:
    """What in_try decides by for a call at ``offset``, read once: the answer, or when
    ``with`` statements cover it (their kind, remote or local or a file's, is known only at
    run time) each one's entering instruction and ``open`` load, and the answer past them."""
    withs: List[Tuple[int, Optional[str]]] = []
    for _ in range(_NESTING):
        # The table maps each instruction to its innermost handler only: a remote ``with``'s
        # exit or an ``except`` block's cleanup hands the exception on from its own code,
        # which the enclosing handler (if any) covers in turn.
        entry = next((e for e in entries if e[0] <= offset < e[1]), None)
        if entry is None:
            return (tuple(withs), False) if withs else False
        if entry[3] >= 0:
            withs.append((entry[3], files.get(entry[3])))
        elif entry[3] == TRY:
            return (tuple(withs), True) if withs else True
        offset = entry[2]
    return (tuple(withs), True) if withs else True


def program_frame() -> Optional[FrameType]:
    """The program's frame making the current remote call: its first outside the interposer."""
    frame: Optional[FrameType] = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename in _OURS:
        frame = frame.f_back
    return frame


def _opened() -> List[Tuple[int, int]]:
    opened: Optional[List[Tuple[int, int]]] = getattr(_open, "stack", None)
    if opened is None:
        opened = _open.stack = []
    return opened


def _read(code: CodeType) -> Tuple[Tuple[Entry, ...], Dict[int, str]]:
    """The exception table with each entry's kind: a ``try``'s handler starts by taking the
    exception (PUSH_EXC_INFO); a ``with``'s goes on to its exit (WITH_EXCEPT_START) and is
    known by the BEFORE_WITH before its first range; anything else passes the exception on.
    With it, the ``with`` statements of ``open``'s files (files_opened)."""
    if not getattr(code, "co_exceptiontable", b""):  # most code: no handler, so no ``with``
        return (), {}  # (listing a module's instructions costs a millisecond)
    bytecode = dis.Bytecode(code)
    every = list(bytecode)
    listed = [ins for ins in every if ins.opname != "EXTENDED_ARG"]
    files: Dict[int, str] = {}
    for n, ins in enumerate(listed):
        load = files_opened.opener(listed, n) if ins.opname == "BEFORE_WITH" else None
        if load is not None:
            files[ins.offset] = load
    ops = {ins.offset: ins.opname for ins in every}
    offsets: List[int] = sorted(ops)
    following = dict(zip(offsets, offsets[1:]))
    table = list(getattr(bytecode, "exception_entries", ()))
    first: Dict[int, int] = {}
    for entry in table:
        first[entry.target] = min(first.get(entry.target, entry.start), entry.start)
    entries = []
    for entry in table:
        kind = PASS
        if ops.get(entry.target) == "PUSH_EXC_INFO":
            kind = TRY
            if ops.get(following.get(entry.target, -1)) == "WITH_EXCEPT_START":
                openers = [o for o in offsets if o < first[entry.target]]
                kind = next((o for o in reversed(openers) if ops[o] == "BEFORE_WITH"), TRY)
        entries.append((entry.start, entry.end, entry.target, kind))
    return tuple(entries), files
