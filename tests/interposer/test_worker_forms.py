"""Templated calls compiled to one function each (worker_forms): the same result, the same
error, the same order as the general steps, and nothing the client sent ever becomes source."""

from __future__ import annotations

import operator
import os
import traceback
from typing import Any, Dict, List

import pytest

from radium_interposer import worker_forms
from radium_interposer.handles import Failure, HandleTable
from radium_interposer.worker_batch import Batches, Template


def slot(i: int) -> Dict[str, Any]:
    return {"$": "_", "i": i}


def path(p: str) -> Dict[str, Any]:
    return {"$": "p", "p": p}


def batches(table: HandleTable) -> Batches:
    def decode(tree: Any, buffers: List[Any]) -> Any:
        raise AssertionError(f"a compiled form decodes nothing ({tree!r})")

    return Batches(table, decode, lambda obj, handle: None, lambda session: None)


TEMPLATES = {
    "a path, a handle and an int": (
        {"f": path("operator.add"), "a": [slot(0), slot(1)], "s": "hi"},
        (1, 5),
    ),
    "keywords, a plain and a path constant": (
        {
            "f": path("builtins.sorted"),
            "a": [slot(0), True, path("operator.neg")],
            "k": ["reverse", "key"],
            "s": "h",
        },
        (2,),
    ),
    "a method of a slot's object, its arguments first in the slots": (
        {"f": {"$": "a", "o": slot(1), "n": "index"}, "a": [slot(0), 0, slot(2)], "s": "ihi"},
        (3, 2, 9),
    ),
    "a float slot and None": (
        {"f": path("builtins.max"), "a": [slot(0), None], "k": ["default"], "s": "f"},
        (2.5,),
    ),
}


def table() -> HandleTable:
    objects = HandleTable()
    objects.put(1, 10)
    objects.put(2, [3, -1, 7])
    objects.put(3, 5)
    return objects


@pytest.mark.parametrize("name", list(TEMPLATES))
def test_a_form_gives_what_the_general_steps_give(name: str) -> None:
    definition, slots = TEMPLATES[name]
    compiled, general = Template(definition), Template(definition)
    assert compiled.compiled is not None
    general.compiled = None
    objects = table()
    run = batches(objects)
    outcomes = []
    for template in (compiled, general):
        try:
            outcomes.append(("value", run.perform(template, slots)))
        except Exception as exc:
            outcomes.append(("error", type(exc), str(exc)))
    assert outcomes[0] == outcomes[1]


def test_a_failed_or_unknown_handle_raises_as_in_the_general_steps() -> None:
    objects = table()
    objects.put(4, Failure(ZeroDivisionError("from an earlier call")))
    template = Template({"f": path("operator.add"), "a": [slot(0), slot(1)], "s": "hh"})
    run = batches(objects)
    with pytest.raises(ZeroDivisionError, match="earlier"):
        run.perform(template, (1, 4))
    with pytest.raises(LookupError, match="unknown handle 99"):
        run.perform(template, (99, 1))
    # The callable first: an unknown method's object raises before its arguments are read.
    method = Template({"f": {"$": "a", "o": slot(0), "n": "x"}, "a": [slot(1)], "s": "hh"})
    with pytest.raises(LookupError, match="unknown handle 98"):
        run.perform(method, (98, 4))


def test_what_the_client_names_is_a_value_never_source() -> None:
    hostile = "real); import os; os._exit(3); (x"
    template = Template({"f": {"$": "a", "o": slot(0), "n": hostile}, "a": [], "s": "h"})
    with pytest.raises(AttributeError, match="import os"):
        batches(table()).perform(template, (1,))
    keywords = Template({"f": path("builtins.dict"), "a": [slot(0)], "k": [hostile], "s": "i"})
    assert batches(table()).perform(keywords, (7,)) == {hostile: 7}


def test_forms_are_shared_by_shape_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    first = Template({"f": path("operator.mul"), "a": [slot(0), slot(1)], "s": "hi"})
    second = Template({"f": path("operator.sub"), "a": [slot(0), slot(1)], "s": "hi"})
    assert first.compiled is not None and second.compiled is not None
    assert first.compiled.__code__ is second.compiled.__code__  # one form, two constants
    assert batches(table()).perform(second, (1, 3)) == operator.sub(10, 3)
    monkeypatch.setattr(worker_forms, "_factories", {})
    monkeypatch.setattr(worker_forms, "MAX_FORMS", 0)
    late = Template({"f": path("operator.mul"), "a": [slot(0), slot(1)], "s": "hi"})
    assert late.compiled is None and batches(table()).perform(late, (1, 2)) == 20


def test_a_traceback_through_a_form_shows_the_line_that_ran() -> None:
    # The remote traceback a client is shown: the form's frame is the interposer's (by its
    # file name, inside the package) and its line is the compiled call, from linecache.
    template = Template({"f": path("operator.truediv"), "a": [slot(0), slot(1)], "s": "ii"})
    with pytest.raises(ZeroDivisionError) as raised:
        batches(table()).perform(template, (1, 0))
    text = "".join(traceback.format_exception(raised.value))
    assert "return resolve_path(name)(s[0], s[1])" in text, text
    form = [entry for entry in traceback.extract_tb(raised.tb) if "<worker form" in entry.filename]
    assert form and form[0].filename.startswith(os.path.dirname(worker_forms.__file__) + os.sep)
