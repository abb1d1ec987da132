"""A template's call compiled once into one Python function (docs/data-plane.md, "Batches").

Run by the general steps (:meth:`radium_interposer.worker_batch.Batches.perform`), a templated
call walks its template's parts at every call: which kind of callable, each argument's kind,
the keyword names. A training loop makes the same call millions of times, so the common forms
(a library function or a method of a slot's object, with arguments that
are handles, slot values, plain constants and library paths) are compiled into one function per
form, whose source holds only slot indices, constant indices and fixed names: what the client
sent (a method's name, keyword names, constants) reaches it as values, never as source. The
forms are cached by their shape, so a worker compiles a handful. Anything else (a constant
tree decoded at each call, ``ndarray.tofile`` adapted to a client file) keeps the general steps.

A compiled call does exactly what the general steps do, in the same order: the callable
resolved first (a handle raising its error, a path through naming's cache), then each argument
from left to right, the call, and the client's files settled whatever it raised.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from radium_interposer import source_forms
from radium_interposer.client_streams import settle
from radium_interposer.naming import resolve_path

__all__ = ["Perform", "compile_form"]

#: ``(slot values, the handle table's get) -> the call's result``.
Perform = Callable[[Tuple[Any, ...], Callable[[Any], Any]], Any]
#: The argument kinds a form can hold (worker_batch's): a handle in a slot, a slot's value, a
#: plain constant, a library path.
HANDLE, VALUE, PLAIN, PATH = range(4)
#: The callable's kinds: a library path, a method of a slot's object.
BY_PATH, BY_METHOD = range(2)
#: At most this many forms compiled (then the general steps serve new shapes).
MAX_FORMS = 1024
_factories: Dict[Tuple[Any, ...], Callable[..., Perform]] = {}


def compile_form(
    callable_kind: int,
    where: Any,
    parts: Sequence[Tuple[int, Any]],
    names: Sequence[str],
) -> Optional[Perform]:
    """The compiled call of a template, or None when its shape has no form. ``where`` is the
    path (BY_PATH) or ``(slot, method name)`` (BY_METHOD); ``parts`` each
    argument's kind (HANDLE, VALUE, PLAIN, PATH) and slot index or constant; ``names`` the
    keyword names of the last arguments."""
    if any(kind not in (HANDLE, VALUE, PLAIN, PATH) for kind, _ in parts):
        return None
    shape = (
        callable_kind,
        where[0] if callable_kind == BY_METHOD else None,
        tuple((kind, part if kind in (HANDLE, VALUE) else None) for kind, part in parts),
        len(names),
    )
    factory = _factories.get(shape)
    if factory is None:
        if len(_factories) >= MAX_FORMS:
            return None
        factory = _factories[shape] = _factory(shape)
    constants = tuple(part for kind, part in parts if kind in (PLAIN, PATH))
    name = where[1] if callable_kind == BY_METHOD else where
    return factory(name, constants, tuple(names))


def _factory(shape: Tuple[Any, ...]) -> Callable[..., Perform]:
    """The function that makes a form's calls, for its template's constants."""
    callable_kind, slot, parts, keywords = shape
    if callable_kind == BY_PATH:
        function = "resolve_path(name)"
    else:
        function = f"getattr(get(s[{slot}]), name)"
    values: List[str] = []
    constant = 0
    for kind, index in parts:
        if kind == HANDLE:
            values.append(f"get(s[{index}])")
        elif kind == VALUE:
            values.append(f"s[{index}]")
        else:
            fetch = f"c[{constant}]"
            values.append(fetch if kind == PLAIN else f"resolve_path({fetch})")
            constant += 1
    positional = values[: len(values) - keywords]
    named = [f"k[{n}]: {value}" for n, value in enumerate(values[len(values) - keywords :])]
    arguments = ", ".join(positional + ([f"**{{{', '.join(named)}}}"] if named else []))
    source = (
        "def factory(name, c, k):\n"
        "    def perform(s, get):\n"
        "        try:\n"
        f"            return {function}({arguments})\n"
        "        finally:\n"
        "            settle()\n"
        "    return perform\n"
    )
    scope: Dict[str, Any] = {"resolve_path": resolve_path, "settle": settle}
    made: Callable[..., Perform] = source_forms.factory(source, "worker form", scope)
    return made
