"""The worker's side of binary batches: templates compiled once per connection, then each
``C`` record run as the JSON call it stands for (docs/data-plane.md, "Batches").

A templated call runs through the same steps as a streamed JSON call (``op_call`` with ``nr``):
the callable and arguments resolved as the codec would (handles from the table, a failed one
raising its error; constant trees decoded at each call, so a name the program's shipped code
rebinds is seen), ``worker_objects.adapt``/``settle``, the result kept under the client's id,
or a :class:`~radium_interposer.handles.Failure` when it raised. Only the decoding differs.
"""

from __future__ import annotations

import types
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from radium_interposer import ops, poison, records, tags, wire, worker_objects, worker_state
from radium_interposer.handles import Failure, HandleTable
from radium_interposer.naming import error_meta, resolve_path
from radium_interposer.session import ClientCallable
from radium_interposer.worker_forms import (
    BY_METHOD,
    BY_PATH,
    HANDLE,
    PATH,
    PLAIN,
    VALUE,
    Perform,
    compile_form,
)
from radium_interposer.worker_stats import Stats

__all__ = ["Answer", "Batches", "Decode", "Part", "Template"]

#: How an argument is had at each call: the handle in a slot, a slot's value, a plain
#: constant, a library path (resolved as a JSON call's are: once per worker, naming's cache),
#: or (TREE) another constant tree decoded at each call.
TREE = 4
Part = Tuple[int, Any]
Decode = Callable[[Any, List[Any]], Any]
#: A waiting call's answer: ``(result, its id) -> (reply metadata, buffers)`` (Worker.result).
Answer = Callable[[Any, int], Tuple[Dict[str, Any], List[Any]]]


class Template:
    """A call site's constant part, ready to run calls with their slot values."""

    __slots__ = (
        "adapts",
        "args",
        "compiled",
        "function",
        "method",
        "names",
        "path",
        "positional",
        "slot",
        "void",
    )

    def __init__(self, definition: Dict[str, Any]) -> None:
        function = definition["f"]
        #: A method of a slot's object: (slot index, name); else None and ``function`` a tree.
        self.method: Optional[Tuple[int, str]] = None
        #: The callable itself is a slot's object (a remote model, a loss function).
        self.slot: Optional[int] = function["i"] if records.is_slot(function) else None
        tag = function.get("$") if type(function) is dict else None
        if tag == tags.ATTRIBUTE and records.is_slot(function["o"]):
            self.method = (function["o"]["i"], str(function.get("n")))
        self.function = function
        #: Its calls return nothing: their result is not kept, and a failure poisons.
        self.void = bool(definition.get("v"))
        #: A library function's path, resolved by naming's cache rather than the codec.
        self.path: Optional[str] = function["p"] if _is_path(function) else None
        kinds = definition["s"]
        parts: List[Part] = []
        for tree in definition["a"]:
            if records.is_slot(tree):
                parts.append((HANDLE if kinds[tree["i"]] == "h" else VALUE, tree["i"]))
            elif _is_path(tree):
                parts.append((PATH, tree["p"]))
            else:
                parts.append((TREE if type(tree) in (dict, list) else PLAIN, tree))
        self.names: Tuple[str, ...] = tuple(definition.get("k", []))
        self.positional = len(parts) - len(self.names)
        self.args = parts
        #: It may be ``ndarray.tofile`` (worker_objects.adapt): by name, or any callable slot.
        name = self.method[1] if self.method else (self.path or "").rpartition(".")[2]
        self.adapts = name == "tofile" or (self.method is None and self.path is None)
        #: The call compiled to one function (worker_forms), when its shape has a form.
        #: Not when it may be ``tofile``: the general steps adapt it.
        self.compiled: Optional[Perform] = None
        if self.method is not None and not self.adapts:
            self.compiled = compile_form(BY_METHOD, self.method, parts, self.names)
        elif self.path is not None and not self.adapts:
            self.compiled = compile_form(BY_PATH, self.path, parts, self.names)


class Batches:
    """Runs a connection's batch records against the lease's handle table."""

    def __init__(
        self,
        table: HandleTable,
        decode: Decode,
        refer: Callable[[Any, Optional[int]], Any],
        notice: Callable[[Any], None],
        result: Optional[Answer] = None,
        stats: Optional[Stats] = None,
    ) -> None:
        self.table, self.decode, self.refer, self.result = table, decode, refer, result
        #: The worker's counters: a waiting call's bytes out, its error.
        self.stats = stats or Stats()
        #: Types of results that are none of what ``refer`` treats apart (keep).
        self.plain_types: Set[type] = set()
        #: Raises the lease's preemption notice at a connection's first call after it came.
        self.notice = notice
        #: Whether a notice came (Worker.preempt): until then no call looks for one.
        self.preempted = False

    def run(self, session: Any, batch: List[records.Record], call_id: int = 0) -> int:
        """Run ``batch`` in order; the number of calls it held. With a ``call_id``, the batch's
        last ``C`` record is a call that waits (data-plane version 3): answered as that call."""
        templates: Dict[int, Template] = session.templates
        last = _last_call(batch) if call_id else -1
        calls = 0
        for index, record in enumerate(batch):
            if record[0] == "C":
                calls += 1
                template = templates[record[1]]
                if index == last:
                    self.answer(session, call_id, template, record[2], record[3])
                else:
                    self.call(session, template, record[2], record[3])
            elif record[0] == "D":
                templates[record[1]] = Template(record[2])
            else:  # "L": after the records before it, which may have used them
                session.release(record[1])
        return calls

    def call(self, session: Any, template: Template, handle: int, slots: Tuple[Any, ...]) -> None:
        """One templated call whose result stays remote as ``handle``."""
        warned = len(session.warned)
        if session.prefix is None:
            session.prefix = handle >> 32
        if session.poison is not None and not _exit_takes(session, template, slots):
            # Not run: locally the program stopped at the error.
            if not template.void:
                self.table.put(handle, Failure(session.poison[1]))
            return
        try:
            if self.preempted:
                self.notice(session)
            if template.compiled is not None:  # perform's first step, without its call
                result = template.compiled(slots, self.table.fetch)
            else:
                result = self.perform(template, slots)
            if template.void:
                pass
            elif type(result) in self.plain_types:  # keep's common case, without its call
                self.table.put(handle, result)
            else:
                self.keep(result, handle)
        # SystemExit and KeyboardInterrupt too: the tenant's code ends its call, not the worker.
        except BaseException as exc:
            if not template.void:
                self.table.put(handle, Failure(exc))
            poison.fail(session, handle, exc)
        if len(session.warned) > warned:  # its warnings come later: say whose they are
            for item in session.warned[warned:]:
                item.setdefault("r", handle)

    def answer(
        self, session: Any, call_id: int, template: Template, handle: int, slots: Tuple[Any, ...]
    ) -> None:
        """A waiting record's call, answered as the waiting JSON call it stands for: its
        result (by value, or left remote as ``handle``), or its error; on a poisoned
        connection the poison's error instead, and the connection is cured."""
        meta: Dict[str, Any] = {"op": ops.CALL, "r": handle}
        if session.prefix is None:
            session.prefix = handle >> 32
        poisoned = poison.answer_instead(session, meta) if session.poison else None
        if poisoned is not None:  # it does not run: locally the program stopped at the error
            poison.answer(session, wire.Frame(wire.CALL, call_id, meta, []), poisoned, self.table)
            return
        assert self.result is not None  # a worker's Batches has it
        try:
            if self.preempted:
                self.notice(session)
            reply, buffers = self.result(self.perform(template, slots), handle)
            kind = wire.RESULT
        # SystemExit and KeyboardInterrupt too: the tenant's code ends its call, not the worker.
        except BaseException as exc:
            reply, buffers, kind = error_meta(exc), [], wire.ERROR
        worker_state.end(session, meta, reply, buffers)
        session.answer(kind, call_id, reply, buffers)
        if buffers or kind == wire.ERROR:  # else nothing to count (a small value's answer)
            self.stats.answer(sum(memoryview(b).nbytes for b in buffers), kind == wire.ERROR)

    def perform(self, template: Template, slots: Tuple[Any, ...]) -> Any:
        """Make the templated call with these slot values: its result, or what it raised."""
        if template.compiled is not None:
            return template.compiled(slots, self.table.fetch)
        function = self._function(template, slots)
        args = self._arguments(template, slots)
        kwargs = {}
        if template.names:
            kwargs = dict(zip(template.names, args[template.positional :]))
            del args[template.positional :]
        if template.adapts:
            function = worker_objects.adapt(function, args)
        try:  # ndarray.tofile into a client file; its writes sent before the call returns
            return function(*args, **kwargs)
        finally:
            worker_objects.settle()

    def keep(self, obj: Any, handle: int) -> None:
        """A streamed call's result under the client's id: ``refer`` without the reference
        tree, which nobody reads (the client made its proxy when it sent the call)."""
        kind = type(obj)
        if kind not in self.plain_types:
            if isinstance(obj, (types.ModuleType, ClientCallable)) or (
                worker_objects.back_reference(obj) is not None
            ):
                self.refer(obj, handle)
                return
            self.plain_types.add(kind)  # isinstance of an ABC costs a microsecond a call
        self.table.put(handle, obj)

    def _function(self, template: Template, slots: Tuple[Any, ...]) -> Any:
        if template.method is not None:
            index, name = template.method
            return getattr(self.table.get(slots[index]), name)
        if template.path is not None:
            return resolve_path(template.path)
        if template.slot is not None:
            return self.table.get(slots[template.slot])
        return self.decode(template.function, [])

    def _arguments(self, template: Template, slots: Tuple[Any, ...]) -> List[Any]:
        args: List[Any] = []
        get, add = self.table.get, args.append
        for how, part in template.args:
            if how == HANDLE:
                add(get(slots[part]))
            elif how == VALUE:
                add(slots[part])
            elif how == PLAIN:
                add(part)
            elif how == PATH:
                add(resolve_path(part))
            else:
                add(self.decode(part, []))
        return args


def _exit_takes(session: Any, template: Template, slots: Tuple[Any, ...]) -> bool:
    """Whether the record is the streamed ``clean_exit`` of a remote ``with`` whose body made
    the poisoning call: it runs, and its manager sees the error (poison.exit_takes)."""
    if template.path != poison.CLEAN_EXIT or len(template.args) != 2:
        return False
    how, part = template.args[1]
    return how == VALUE and poison.exit_takes(session, slots[part])


def _last_call(batch: List[records.Record]) -> int:
    """The index of the batch's last ``C`` record: the waiting call (the session checked that
    there is one)."""
    return max(i for i, record in enumerate(batch) if record[0] == "C")


def _is_path(tree: Any) -> bool:
    return type(tree) is dict and tree.get("$") == tags.PATH and type(tree.get("p")) is str
