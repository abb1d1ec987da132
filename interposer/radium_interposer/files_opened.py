"""Which ``with`` statements manage a file of the builtin ``open`` (``with open(path) as f:``).

Such a manager's exit closes the file and never swallows an exception, so a streamed call in
its body may fail after the body is left, as anywhere else (guarded): unlike a ``with`` of the
program's own manager, it has nothing to see. Read from the bytecode (the call that makes the
manager, and the name it calls), and at run time that name is the builtin one.
"""

from __future__ import annotations

import dis
import io
from types import FrameType
from typing import List, Optional

__all__ = ["opener", "opens_a_file"]

#: The builtin ``open``, as it is before the program runs.
_OPEN = io.open
#: How far back the load of ``open`` is looked for.
_BACK = 32


def opener(listed: List[dis.Instruction], before_with: int) -> Optional[str]:
    """The instruction (``LOAD_GLOBAL`` or ``LOAD_NAME``) that loads ``open`` for the call
    whose result the ``BEFORE_WITH`` at ``listed[before_with]`` enters; None when the manager
    is made otherwise (or its making takes jumps: not followed)."""
    for start in range(before_with - 1, max(before_with - _BACK, 0) - 1, -1):
        load = _loads_open(listed, start)
        if load is not None:
            return load if _makes_one_value(listed[start:before_with]) else None
    return None


def _loads_open(listed: List[dis.Instruction], index: int) -> Optional[str]:
    """``open``'s load when ``listed[index]`` starts loading it as a callable."""
    ins = listed[index]
    if ins.opname == "LOAD_GLOBAL" and ins.argval == "open" and "NULL" in ins.argrepr:
        return "LOAD_GLOBAL"
    following = listed[index + 1] if index + 1 < len(listed) else None
    if (
        ins.opname == "PUSH_NULL"
        and following is not None
        and following.opname in ("LOAD_NAME", "LOAD_GLOBAL")
        and following.argval == "open"
    ):
        return following.opname
    return None


def _makes_one_value(run: List[dis.Instruction]) -> bool:
    """Whether ``run`` leaves one value, never reaching below where it started: the call of
    the callable it starts with, whose result is the manager."""
    depth = 0
    for ins in run:
        if "JUMP" in ins.opname or ins.opname.startswith(("RETURN", "RAISE", "RERAISE")):
            return False
        arg = ins.arg if ins.opcode >= dis.HAVE_ARGUMENT else None
        depth += dis.stack_effect(ins.opcode, arg)
        if depth <= 0:
            return False
    return depth == 1


def opens_a_file(frame: FrameType, load: str) -> bool:
    """Whether ``open``, as the ``load`` instruction finds it in ``frame`` now, is the builtin
    (the program may have a function of that name, or have put one in ``builtins``)."""
    namespaces = (frame.f_locals, frame.f_globals) if load == "LOAD_NAME" else (frame.f_globals,)
    for namespace in (*namespaces, frame.f_builtins):
        if "open" in namespace:
            return namespace["open"] is _OPEN
    return False
