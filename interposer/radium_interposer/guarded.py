"""Whether the program makes a call where an error must surface at once: then the call is
not pipelined.

A pipelined call's error (and its warnings) surface at the next use of its result. Inside a
``try`` body that use is often past the handler (``try: return np.linalg.inv(m)`` /
``except LinAlgError:``), and inside the body of a local ``with`` past its exit
(``with pytest.raises(...)``, ``with warnings.catch_warnings(record=True)``): the handler or
manager would never see what it is written for. A call made there waits for its answer
instead, as locally. The body of a *remote* ``with`` (``torch.no_grad()``, ``np.errstate``)
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
from typing import Dict, List, Optional, Tuple

from radium_interposer import files_opened

__all__ = ["attribute_use", "entered", "in_try", "instruction", "left", "program_frame"]

_OURS = os.path.dirname(os.path.abspath(__file__)) + os.sep
#: An exception table entry: its range, its handler, and its kind: TRY, PASS (a cleanup that
#: hands the exception on from its handler's code), or a ``with``'s: where it was entered.
Entry = Tuple[int, int, int, int]
TRY, PASS = -1, -2
#: Per thread, the remote ``with`` statements now open: (frame id, entering instruction).
_open = threading.local()
#: How many handlers deep a call is followed out (deeper is taken as inside a ``try``).
_NESTING = 16
#: Each code object's exception table, read once, by the code's id (with the code itself, so
#: the id is not reused): it holds the program's code objects, which its functions hold anyway.
#: With it, in_try's answers by offset where they cannot change (no ``with`` on the way), and
#: the ``with`` statements of a file of ``open``: by their BEFORE_WITH, how ``open`` is loaded.
_tables: Dict[int, Tuple[CodeType, Tuple[Entry, ...], Dict[int, bool], Dict[int, str]]] = {}
_SUPPORTED = sys.version_info >= (3, 11)
#: Each code object's instructions, read once as _tables: by offset, the instruction's name,
#: its argument (as text) and the name of the instruction that takes the value it makes.
_instructions: Dict[int, Tuple[CodeType, Dict[int, Tuple[str, str, str]]]] = {}
_READS_ATTRIBUTE = frozenset(("LOAD_ATTR", "LOAD_METHOD"))
#: Instructions that push one value and run nothing of the program's: between a value and the
#: instruction that takes it, the other operand's (``p.grad * lr``).
_LOADS = frozenset(("LOAD_FAST", "LOAD_CONST", "LOAD_NAME", "LOAD_DEREF", "LOAD_CLOSURE"))
#: What takes two values and makes one, and what changes the value on top.
_TAKES_TWO = ("BINARY_", "INPLACE_")
_ON_TOP = ("UNARY_", "LOAD_ATTR")
#: What instruction() names as the taker of an attribute given to a method of the variable it
#: was read from (``p.data.add_(p.grad)``): a call of a remote method, the variable being a
#: remote object, where None and a remote None are alike.
OWN_METHOD = "OWN_METHOD_CALL"
_VARIABLES = frozenset(("LOAD_FAST", "LOAD_NAME", "LOAD_DEREF"))
#: How far _taker looks (each code object is read once, but a long run of loads is no use).
_AHEAD = 16


def entered() -> None:
    """A remote context manager was entered by the program's ``with`` (called by exits)."""
    frame = program_frame()
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
    answer = known[2].get(frame.f_lasti)
    if answer is None:
        answer, fixed = _covered(known[1], known[3], frame)
        if fixed:  # no ``with`` on the way: the same at every call from this instruction
            known[2][frame.f_lasti] = answer
    return answer


def _covered(
    entries: Tuple[Entry, ...], files: Dict[int, str], frame: FrameType
) -> Tuple[bool, bool]:
    """in_try's answer, and whether it holds at every call from this instruction: unless a
    ``with`` covers it, whose kind (remote or local, a file's) is known only at run time."""
    offset, opened, fixed = frame.f_lasti, _opened(), True
    for _ in range(_NESTING):
        # The table maps each instruction to its innermost handler only: a remote ``with``'s
        # exit or an ``except`` block's cleanup hands the exception on from its own code,
        # which the enclosing handler (if any) covers in turn.
        entry = next((e for e in entries if e[0] <= offset < e[1]), None)
        if entry is None:
            return False, fixed
        if entry[3] >= 0:
            fixed = False
            opener = files.get(entry[3])  # a file's exit sees nothing: as a remote one's
            local = opener is None or not files_opened.opens_a_file(frame, opener)
            if local and (id(frame), entry[3]) not in opened:
                return True, fixed
        elif entry[3] == TRY:
            return True, fixed
        offset = entry[2]
    return True, fixed


def attribute_use(frame: Optional[FrameType], name: str) -> Optional[str]:
    """The instruction (its name: ``BINARY_OP``, ``LOAD_ATTR``) that takes the value of the
    attribute ``name`` the program's ``frame`` is reading; None when the frame is not at an
    instruction reading that attribute itself (``getattr(x, name)``, or our own read)."""
    now = instruction(frame)
    return now[2] if now is not None and now[0] in _READS_ATTRIBUTE and now[1] == name else None


def instruction(frame: Optional[FrameType]) -> Optional[Tuple[str, str, str]]:
    """The instruction the program's ``frame`` is running: its name, its argument (as text)
    and the name of the instruction that takes the value it makes (:func:`_taker`)."""
    if frame is None:
        return None
    code = frame.f_code
    known = _instructions.get(id(code))
    if known is None or known[0] is not code:
        known = _instructions[id(code)] = (code, _read_instructions(code))
    return known[1].get(frame.f_lasti)


def _read_instructions(code: CodeType) -> Dict[int, Tuple[str, str, str]]:
    listed = [i for i in dis.get_instructions(code) if i.opname != "EXTENDED_ARG"]
    return {
        ins.offset: (
            ins.opname,
            str(ins.argval),
            OWN_METHOD if _to_own_method(listed, n) else _taker(listed, n + 1),
        )
        for n, ins in enumerate(listed[:-1])
    }


def _to_own_method(listed: List[dis.Instruction], n: int) -> bool:
    """Whether the attribute read by ``listed[n]`` is given to a method reached from the same
    variable it is read from, plain loads around it: ``p.data.add_(p.grad, alpha=-lr)``."""
    owner = listed[n - 1] if n >= 3 and listed[n].opname == "LOAD_ATTR" else None
    if owner is None or owner.opname not in _VARIABLES:
        return False
    start = n - 2  # back over the plain arguments before it, to the method's load
    while start > 0 and _plain_load(listed[start]):
        start -= 1
    method, before = listed[start], n - 2 - start
    if not (method.opname == "LOAD_METHOD" or method.argrepr.startswith("NULL|self")):
        return False
    chain = start - 1  # back over the attributes the method is read from, to the variable
    while chain > 0 and listed[chain].opname == "LOAD_ATTR" and "NULL" not in listed[chain].argrepr:
        chain -= 1
    if (listed[chain].opname, listed[chain].argval) != (owner.opname, owner.argval):
        return False
    after = 0  # forward over the plain arguments after it, to the call that takes them all
    for ins in listed[n + 1 : n + 1 + _AHEAD]:
        if _plain_load(ins):
            after += 1
        elif ins.opname in ("PRECALL", "CALL"):
            return bool(ins.argval == before + 1 + after)
        elif not (ins.opname == "KW_NAMES" or (after and ins.opname.startswith("UNARY_"))):
            return False
    return False


def _taker(listed: List[dis.Instruction], start: int) -> str:
    """The name of the instruction that takes the value the one before ``start`` makes: the
    next, or past loads of another operand the one that takes both (``BINARY_OP`` in
    ``p.grad * lr``); ``?`` when something else comes first (a call: not followed)."""
    above = 0  # values pushed over ours since
    for ins in listed[start : start + _AHEAD]:
        name = ins.opname
        calls = ins.argrepr.startswith("NULL")  # a callable is loaded: a call comes
        if name == "LOAD_GLOBAL" and calls:
            return "?"
        if _plain_load(ins):
            above += 1
        elif above == 0:
            return name
        elif name.startswith(_TAKES_TWO):
            if above == 1:
                return name  # ours is its left operand
            above -= 1
        elif calls or not name.startswith(_ON_TOP):
            return "?"
    return "?"


def _plain_load(ins: dis.Instruction) -> bool:
    """Whether ``ins`` pushes one value and runs nothing of the program's."""
    return ins.opname in _LOADS or (ins.opname == "LOAD_GLOBAL" and "NULL" not in ins.argrepr)


def program_frame() -> Optional[FrameType]:
    """The program's frame making the current remote call: its first outside the interposer."""
    frame: Optional[FrameType] = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_OURS):
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
    bytecode = dis.Bytecode(code)
    listed = [ins for ins in bytecode if ins.opname != "EXTENDED_ARG"]
    files: Dict[int, str] = {}
    for n, ins in enumerate(listed):
        load = files_opened.opener(listed, n) if ins.opname == "BEFORE_WITH" else None
        if load is not None:
            files[ins.offset] = load
    ops = {ins.offset: ins.opname for ins in bytecode}
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
