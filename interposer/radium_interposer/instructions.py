"""What the program does with a value it is making: read from its frame's bytecode, once per
code object (Python 3.11+ opcodes; on older Pythons the answers only make calls wait).

A remote read may be answered without waiting when the instruction that takes its value uses
it the same way whether it is None or a remote None (``lr * p.grad``, ``p.grad.zero_()``,
``p.data.add_(p.grad)``); a ``for`` loop that unpacks what ``next`` gives gets the item's
items with it; a ``with`` that drops what its enter returns streams that enter. Each asks
:func:`instruction`.
"""

from __future__ import annotations

import dis
from types import CodeType, FrameType
from typing import Dict, List, Optional, Tuple

__all__ = ["OWN_METHOD", "attribute_use", "instruction"]

#: Each code object's instructions, read once: by offset, the instruction's name,
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
