"""Python's own values by structure: encoded, through JSON (what the wire carries), decoded."""

from __future__ import annotations

import argparse
import collections
import dataclasses
import datetime
import decimal
import enum
import fractions
import json
import pathlib
import threading
import types
from typing import Any, NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from radium_interposer import codec, structs


@dataclasses.dataclass
class Config:
    lr: float
    layers: list  # type: ignore[type-arg]
    name: str = "net"


class Point(NamedTuple):
    x: int
    y: int


class Color(enum.Enum):
    RED = 1
    GREEN = "g"


def round_trip(value: Any) -> Any:
    buffers: list[Any] = []
    tree = json.loads(json.dumps(codec.encode(value, buffers, lambda _: None)))
    return codec.decode(tree, buffers, _resolve)


def _resolve(node: dict[str, Any]) -> Any:
    assert node["$"] == "cls"
    return codec.find_class(node["p"])


VALUES = [
    argparse.Namespace(epochs=3, lr=0.1, layers=[64, 32], name=None),
    types.SimpleNamespace(a=1, b=(2, 3)),
    Config(0.01, [1, 2]),
    Point(3, 4),
    Color.RED,
    Color.GREEN,
    pathlib.PurePosixPath("/data/train.csv"),
    pathlib.PosixPath("relative/ckpt.pt"),
    datetime.datetime(2026, 11, 23, 12, 30, 5, 123456, tzinfo=datetime.timezone.utc),
    datetime.datetime(2026, 1, 2, 3, 4, 5),
    datetime.date(2024, 2, 29),
    datetime.time(23, 59, 58, 1),
    datetime.timedelta(days=-2, seconds=5, microseconds=7),
    decimal.Decimal("1.10"),
    decimal.Decimal("-Infinity"),
    fractions.Fraction(-7, 3),
    collections.OrderedDict([("b", 1), ("a", 2)]),
    collections.Counter("mississippi"),
    collections.deque([1, 2, 3], maxlen=5),
    collections.defaultdict(list, {"k": [1]}),
    range(2, 11, 3),
    bool,
    float,
    collections.OrderedDict,
    {"nested": [Point(1, 2), {Color.RED: datetime.date(2020, 1, 1)}]},
]


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_values_keep_their_type_and_contents(value: Any) -> None:
    again = round_trip(value)
    assert again == value and type(again) is type(value)
    if isinstance(value, collections.deque):
        assert again.maxlen == value.maxlen
    if isinstance(value, collections.defaultdict):
        assert again.default_factory is list


def test_results_of_the_standard_library_come_back_by_value() -> None:
    for value in VALUES:
        user_record = type(value) in (Config, Point, Color, dict)  # (the dict holds records)
        assert codec.is_plain(value) is not user_record, value  # user records stay remote
    assert codec.is_plain(argparse.Namespace(x=threading.Lock())) is False


def test_a_record_whose_class_is_unknown_keeps_its_fields() -> None:
    tree = {"$": "dc", "t": "nowhere.Config", "f": {"$": "d", "k": ["lr"], "v": [0.5]}}
    assert codec.decode(tree, [], _resolve) == types.SimpleNamespace(lr=0.5)
    named = {"$": "nt", "t": "nowhere.Point", "f": ["x", "y"], "v": [1, 2]}
    point = codec.decode(named, [], _resolve)
    assert (point.x, point.y, type(point).__name__) == (1, 2, "Point")
    with pytest.raises(ValueError, match=r"enum nowhere\.Color is not known"):
        codec.decode({"$": "en", "t": "nowhere.Color", "n": "RED"}, [], _resolve)


def test_what_cannot_cross_names_its_type() -> None:
    with pytest.raises(codec.EncodeError, match=r"_thread\.lock cannot cross"):
        codec.encode(threading.Lock(), [], lambda _: None)
    with pytest.raises(ValueError, match="unknown namespace type"):
        codec.decode({"$": "ns", "t": "os.system", "d": {}}, [], _resolve)


nodes = st.fixed_dictionaries(
    {"$": st.sampled_from(sorted(structs.TAGS))},
    optional={
        key: st.one_of(st.none(), st.integers(), st.text(max_size=12), st.lists(st.integers()))
        for key in ("t", "d", "f", "n", "k", "v", "m")
    },
)


@settings(max_examples=5000, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(nodes)
def test_malformed_values_are_refused_not_crashed_on(node: dict[str, Any]) -> None:
    """What a worker does with any garbage value: an exception its call reports, no more."""
    try:
        codec.decode(node, [], _resolve)
    except Exception as exc:  # the worker answers ERROR with it; nothing else may happen
        assert not isinstance(exc, (SystemExit, KeyboardInterrupt))


def test_a_class_merely_named_like_a_standard_one_is_not_taken_for_it() -> None:
    """A stand-in of a remote OrderedDict shares the name, not the class: it is a reference."""
    lookalike = type("OrderedDict", (), {"__module__": "collections"})()
    assert structs.encode(lookalike, lambda v: v, lambda c: None) is None
