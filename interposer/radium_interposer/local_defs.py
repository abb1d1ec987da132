"""Classes of the program defined inside a function (``def test_x(self): class Sub(np.ndarray):
...``; qualname ``TestX.test_x.<locals>.Sub``), shipped to the worker like a nested class
(docs/remoting.md, "Classes defined in functions"). The client's side.

Such a class can run on the worker when its body and methods use no variable of the function
that defines it: its source then means the same in its module's namespace. The variables it
uses are the free variables of its body's code object, found in the code of the function that
defines it (its ``co_consts``), or, when that function cannot be found, in its methods'
closures. Each class object is its own definition there (a function called twice makes two
classes), so each gets a path of its own: its qualname with ``<locals>`` numbered.
"""

from __future__ import annotations

import itertools
import sys
import types
from typing import Any, List, Optional, Set

__all__ = ["is_local", "refusal", "unique_key"]

#: Numbers the definitions of local classes: two class objects never share a worker path.
_numbers = itertools.count(1)


def is_local(obj: Any) -> bool:
    """Whether ``obj`` was defined inside a function."""
    return "<locals>" in str(getattr(obj, "__qualname__", ""))


def unique_key(qualname: str) -> str:
    """A path of its own for one local class: ``f.<locals>.Sub`` -> ``f.<locals3>.Sub``."""
    return qualname.replace("<locals>", f"<locals{next(_numbers)}>")


def refusal(obj: Any) -> Optional[str]:
    """Why a local class cannot run on the worker (the function's variables it uses), or None
    when it can."""
    names = _enclosing_names(obj)
    if not names:
        return None
    return (
        f"{obj.__qualname__}: a class defined inside a function cannot run on the worker when "
        f"it uses that function's variables ({', '.join(names)}); pass them as arguments, or "
        f"define the class at the top level of its module"
    )


def _enclosing_names(cls: Any) -> List[str]:
    code = _body_code(cls)
    names: Set[str] = set(code.co_freevars) if code is not None else set()
    if code is None:  # its methods' closures, at least (a stripped class has none: no check)
        for value in vars(cls).values():
            function = getattr(value, "__func__", getattr(value, "fget", value))
            names.update(getattr(getattr(function, "__code__", None), "co_freevars", ()))
    names.discard("__class__")  # super()'s cell: the class itself, defined there too
    return sorted(names)


def _body_code(cls: Any) -> Optional[types.CodeType]:
    """The code of the class statement's body, in the code of the function defining it."""
    import inspect  # here: it costs every remoted Python's start milliseconds

    *outer, name = str(cls.__qualname__).split(".")
    found: Any = sys.modules.get(str(getattr(cls, "__module__", "")))
    code: Optional[types.CodeType] = None
    for part in outer:
        if part == "<locals>":
            if code is None:  # the function: its own code, past decorators that wrap it
                function = inspect.unwrap(getattr(found, "__func__", found))
                code = getattr(function, "__code__", None)
        elif code is not None:
            code = _child(code, part, None)
        elif isinstance(found, (type, types.ModuleType)):
            found = vars(found).get(part)
        if code is None and part == "<locals>":
            return None
    try:
        line: Optional[int] = inspect.getsourcelines(cls)[1]
    except (OSError, TypeError):
        line = None
    return None if code is None else _child(code, name, line)


def _child(code: types.CodeType, name: str, line: Optional[int]) -> Optional[types.CodeType]:
    """The code object named ``name`` defined in ``code`` (the one at ``line`` if several)."""
    found = [c for c in code.co_consts if isinstance(c, types.CodeType) and c.co_name == name]
    if len(found) > 1:
        found = [c for c in found if c.co_firstlineno == line] or found[:1]
    return found[0] if found else None
