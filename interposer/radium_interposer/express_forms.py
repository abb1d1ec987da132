"""A plan's slot values, read by a function compiled once per plan shape (the client's half of
what :mod:`radium_interposer.worker_forms` is to the worker).

A plan (:mod:`radium_interposer.express`) says, for each argument of its calls, whether it is a
handle, an int, a float or a constant the call must equal. Walking that list at every call
costs more than the call's record itself, so each shape (the callable's kind, the parts' kinds,
the number of keyword arguments) gets one function that reads the arguments straight into the
record's values, in the same order and with the same checks as the walk it replaces. Its source
holds only indices and fixed names: the plan's constants and the callable's name are values.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from radium_interposer import records, source_forms, tags

__all__ = ["CONSTANT", "FLOAT", "HANDLE", "INT", "ITSELF", "NO_SLOT", "OWNER", "Values", "form"]

#: How a slot or constant of the call is had: a proxy's handle id, an int (in int64), a float,
#: or a constant the call must equal.
HANDLE, INT, FLOAT, CONSTANT = range(4)
#: Where the callable's own slot comes from: none (a path), its handle, its owner's handle.
NO_SLOT, ITSELF, OWNER = range(3)
#: ``(function tree, args, kwargs, connection) -> the slot values, or None: it does not fit``.
Values = Callable[[Dict[str, Any], Tuple[Any, ...], Dict[str, Any], Any], Optional[Tuple[Any, ...]]]
_factories: Dict[Tuple[Any, ...], Callable[..., Values]] = {}


def form(
    callable_: int,
    name: Any,
    parts: Sequence[Tuple[int, Any]],
    keywords: int,
    ref_of: Callable[[Any], Any],
    conn_of: Callable[[Any], Any],
) -> Values:
    """The values function of a plan: its callable's kind and name (the path or the method's
    name the call must have), its parts (kind, constant), how many of them are keyword values;
    ``ref_of`` and ``conn_of`` read a proxy's reference tree and connection."""
    shape = (callable_, tuple(kind for kind, _ in parts), keywords)
    factory = _factories.get(shape)
    if factory is None:
        factory = _factories[shape] = _factory(*shape)
    constants = tuple(constant for kind, constant in parts if kind == CONSTANT)
    return factory(name, constants, ref_of, conn_of, *records.INT64)


def _factory(callable_: int, kinds: Tuple[int, ...], keywords: int) -> Callable[..., Values]:
    lines: List[str] = []
    out: List[str] = []
    if callable_ == NO_SLOT:
        lines.append('if function["p"] != name: return None')
    elif callable_ == ITSELF:
        out.append('function["id"]')
    else:
        lines.append('owner = function["o"]')
        lines.append(f'if owner["$"] != {tags.HANDLE!r} or function["n"] != name: return None')
        out.append('owner["id"]')
    names = [f"v{n}" for n in range(len(kinds))]
    positional = names[: len(names) - keywords]
    if positional:
        lines.append(f"{', '.join(positional)}, = args")
    if keywords:
        lines.append(f"{', '.join(names[len(positional) :])}, = kwargs.values()")
    constant = 0
    for value, kind in zip(names, kinds):
        if kind == HANDLE:
            lines += [
                f"ref = ref_of({value})",
                f'if ref["$"] != {tags.HANDLE!r}: return None',
                f"origin = conn_of({value})",
                # its result must exist first (proxy.reference)
                "if origin is not None and origin is not conn and origin.unsynced:",
                "    origin.sync(quiet=True)",
                f'{value} = ref["id"]',
            ]
            out.append(value)
        elif kind == CONSTANT:
            lines.append(f"if {value} != c[{constant}]: return None")
            constant += 1
        elif kind == INT:
            lines.append(f"if not low <= {value} < high: return None")
            out.append(value)
        else:
            out.append(value)
    lines.append(f"return ({''.join(item + ', ' for item in out)})")
    body = "".join(f"        {line}\n" for line in lines)
    source = (
        "def factory(name, c, ref_of, conn_of, low, high):\n"
        "    def values(function, args, kwargs, conn):\n"
        f"{body}"
        "    return values\n"
    )
    made: Callable[..., Values] = source_forms.factory(source, "plan form", {})
    return made
