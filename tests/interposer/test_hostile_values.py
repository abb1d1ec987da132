"""What a client does with a hostile worker's values (docs/data-plane.md, "Values"): it imports
nothing on the worker's word, resolves classes only from modules it already imported, and never
turns an array into many times its size. Each refusal is also shown against the old (importing,
always-lists) behaviour, so the check could fail; the worker's own side still imports what its
client names, by design."""

from __future__ import annotations

import importlib
import json
import struct
import sys
import tracemalloc
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest

from radium_interposer import arrays, classes, codec, errors, proxy, received, structs


@pytest.fixture
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], Path]]:
    """Plant modules a worker wrote through the file service: a directory first on sys.path
    (the program's own, as for ``python -c``); importing one writes its marker file."""
    monkeypatch.syspath_prepend(str(tmp_path))
    names: list[str] = []

    def plant(name: str) -> Path:
        marker = tmp_path / f"imported-{name}"
        (tmp_path / f"{name}.py").write_text(
            f"open({str(marker)!r}, 'w').close()\n"
            "import enum, dataclasses\n"
            "class Color(enum.Enum):\n    RED = 1\n"
            "@dataclasses.dataclass\nclass Config:\n    lr: float = 0.0\n"
            "import collections\nPoint = collections.namedtuple('Point', ['lr'])\n"
        )
        names.append(name)
        return marker

    yield plant
    for name in names:  # the planted module only, if a test imported it
        if str(getattr(sys.modules.get(name), "__file__", "")).startswith(str(tmp_path)):
            del sys.modules[name]
    importlib.invalidate_caches()


def _no_references(node: dict[str, Any]) -> Any:
    raise AssertionError(f"no reference expected: {node}")


def _old_resolve(node: dict[str, Any]) -> Any:
    """The client's resolution before issue 34: a module by name, imported on the worker's word."""
    if node["$"] == "m":
        return importlib.import_module(str(node["n"]))
    raise AssertionError(node)


def _through_json(tree: Any) -> Any:
    return json.loads(json.dumps(tree))


def test_a_module_the_worker_names_is_not_imported(planted: Callable[[str], Path]) -> None:
    marker = planted("pwnmod")
    tree = _through_json({"$": "m", "n": "pwnmod"})
    with pytest.raises(codec.DecodeError, match=r"module 'pwnmod'.*neither imported nor remoted"):
        proxy.decode(tree, [])
    assert not marker.exists() and "pwnmod" not in sys.modules
    # The old resolution imports it: the planted code runs.
    codec.decode(tree, [], _old_resolve)
    assert marker.exists()


def test_modules_the_program_has_or_remoted_still_resolve(
    monkeypatch: pytest.MonkeyPatch, planted: Callable[[str], Path]
) -> None:
    assert proxy.decode({"$": "m", "n": "json"}, []) is json
    marker = planted("pwnpkg")
    monkeypatch.setattr(received, "remoted", lambda name: name == "pwnpkg.sub")
    # A remoted submodule of a package that is neither imported nor remoted would import the
    # package from here: refused. Remoted all the way, it is the finder's (checked, not run).
    with pytest.raises(codec.DecodeError, match=r"pwnpkg\.sub"):
        proxy.decode({"$": "m", "n": "pwnpkg.sub"}, [])
    assert not marker.exists()
    monkeypatch.setattr(received, "remoted", lambda name: name.startswith("pwnpkg"))
    assert received._remoted_all_the_way("pwnpkg.sub")
    assert not received._remoted_all_the_way("json.pwnpkg")
    assert not received._remoted_all_the_way("pwnpkg..x")
    with pytest.raises(codec.DecodeError, match="None"):
        proxy.decode({"$": "m", "n": None}, [])


@pytest.mark.parametrize("tag", ["dc", "nt", "en"])
def test_a_class_the_worker_names_is_not_imported(tag: str, planted: Callable[[str], Path]) -> None:
    marker = planted("pwnrec")
    node = {
        "dc": {"$": "dc", "t": "pwnrec.Config", "f": {"$": "d", "k": ["lr"], "v": [0.5]}},
        "nt": {"$": "nt", "t": "pwnrec.Point", "f": ["lr"], "v": [0.5]},
        "en": {"$": "en", "t": "pwnrec.Color", "n": "RED"},
    }[tag]
    if tag == "en":
        with pytest.raises(codec.DecodeError, match=r"enum pwnrec\.Color is not known"):
            proxy.decode(node, [])
    else:  # rebuilt from its fields, as for any class this side does not have
        value = proxy.decode(node, [])
        assert value.lr == 0.5 and type(value).__module__ != "pwnrec"
    assert not marker.exists()
    # The worker's policy imports what its client names (the tenant's word, by design): the
    # very check the client's decode passes, made with it, runs the planted module.
    again = codec.decode(node, [], _no_references, codec.importing)
    assert marker.exists() and type(again).__module__ == "pwnrec"


def test_classes_resolve_from_imported_modules_only_and_only_to_classes() -> None:
    assert codec.find_class("collections.OrderedDict") is __import__("collections").OrderedDict
    assert codec.find_class("os.system") is None  # a function, not a class
    assert codec.find_class("nowhere.Thing") is None
    # A module's __getattr__ (which may import) is not consulted: its own names only.
    lazy = types.ModuleType("radium_test_lazy")
    vars(lazy)["__getattr__"] = lambda name: pytest.fail(f"__getattr__ ran for {name}")
    sys.modules["radium_test_lazy"] = lazy
    try:
        assert codec.find_class("radium_test_lazy.Anything") is None
    finally:
        del sys.modules["radium_test_lazy"]
    # The class tag: a loaded class as itself, anything else a stand-in (never imported).
    assert classes.local_or_stand_in("builtins.float", 0) is float
    stand_in = classes.local_or_stand_in("pwnmod_never.Thing", 0)
    assert classes.path_of(stand_in) == "pwnmod_never.Thing" and "pwnmod_never" not in sys.modules


def test_an_enum_member_is_a_member_not_any_attribute() -> None:
    from tests.interposer.test_structs import Color

    path = f"{Color.__module__}.Color"
    assert proxy.decode({"$": "en", "t": path, "n": "GREEN"}, []) is Color.GREEN
    for name in ("__class__", "mro", "_member_map_"):
        with pytest.raises(codec.DecodeError, match="has no member"):
            proxy.decode({"$": "en", "t": path, "n": name}, [])


def test_standard_values_use_modules_loaded_before_the_worker_spoke() -> None:
    structs.preload()
    assert all(name in sys.modules for name in structs.PRELOADED)
    assert str(proxy.decode({"$": "dec", "v": "1.10"}, [])) == "1.10"
    without = {"decimal", "argparse"}

    def missing(name: str) -> Any:
        return None if name in without else sys.modules.get(name)

    with pytest.raises(codec.DecodeError, match="has not imported decimal"):
        codec.decode({"$": "dec", "v": "1"}, [], _no_references, missing)
    # A Namespace for a program that never imported argparse: its attributes all the same.
    tree = {"$": "ns", "t": "argparse.Namespace", "d": {"$": "d", "k": ["a"], "v": [1]}}
    assert codec.decode(tree, [], _no_references, missing) == types.SimpleNamespace(a=1)


def test_a_remote_errors_arguments_import_nothing(planted: Callable[[str], Path]) -> None:
    marker = planted("pwnerr")
    meta = {
        "type": "ValueError",
        "module": "builtins",
        "error": "ValueError: bad",
        "args": [{"$": "en", "t": "pwnerr.Color", "n": "RED"}],
    }
    error = errors.rebuild_error(meta)
    assert type(error) is ValueError and error.args == ("ValueError: bad",)
    assert not marker.exists()


def test_a_named_tuple_without_its_class_has_a_bounded_number_of_fields(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fields = [f"f{i}" for i in range(structs.MAX_FIELDS)]
    node = {"$": "nt", "t": "nowhere.Wide", "f": fields, "v": list(range(len(fields)))}
    assert proxy.decode(node, [])[-1] == structs.MAX_FIELDS - 1
    node = {**node, "f": [*fields, "extra"], "v": [*node["v"], 0]}
    with pytest.raises(codec.DecodeError, match=r"named tuple of 4097 fields \(at most 4096\)"):
        proxy.decode(node, [])
    monkeypatch.setattr(structs, "MAX_FIELDS", 1 << 62)  # unbounded, as before: a class is made
    assert proxy.decode(node, [])._fields[-1] == "extra"


def test_values_nested_past_the_stack_are_refused() -> None:
    tree: Any = 1
    for _ in range(100_000):
        tree = [tree]
    with pytest.raises(codec.DecodeError, match="nested too deeply"):
        proxy.decode(tree, [])


def _nd(dtype: str, shape: list[int], scalar: bool = False) -> dict[str, Any]:
    return {"$": "nd", "dt": dtype, "sh": shape, "i": 0, **({"sc": 1} if scalar else {})}


def test_small_arrays_without_numpy_are_nested_lists() -> None:
    def lists(node: dict[str, Any], data: bytes) -> Any:
        return arrays.decode(node, bytearray(data), None)

    six = b"".join(n.to_bytes(8, "little") for n in range(6))
    assert lists(_nd("<i8", [2, 3]), six) == [[0, 1, 2], [3, 4, 5]]
    assert lists(_nd("|b1", [2]), b"\x01\x00") == [True, False]
    assert lists(_nd("<f8", [], scalar=True), struct.pack("<d", 2.5)) == 2.5
    assert lists(_nd("<i4", []), struct.pack("<i", -7)) == -7
    assert lists(_nd("<i8", [2, 0]), b"") == [[], []]
    assert lists(_nd("<i8", [0, 3]), b"") == []
    assert lists(_nd("<f4", [0]), b"") == []


@pytest.mark.parametrize(
    ("node", "data", "message"),
    [
        (_nd("<i8", [2, 3]), bytes(47), "does not match its 47 bytes"),
        (_nd("|u1", [4]), bytes(5), "does not match"),
        (_nd("|u1", [-1]), bytes(1), "sizes"),
        (_nd("|u1", [True]), bytes(1), "sizes"),
        (_nd("|u1", [1] * 65), bytes(1), "at most 64"),
        (_nd("|u1", [1 << 40, 0]), b"", "too many lists"),
        (_nd(">i8" if sys.byteorder == "little" else "<i8", [1]), bytes(8), "need numpy"),
        (_nd("<M8[D]", [1]), bytes(8), "need numpy"),
        (_nd("<c16", [2]), bytes(16), "does not match"),
        (_nd("|S0", [1 << 40]), b"", "needs numpy"),
        (_nd("<U4", [1 << 40]), bytes(16), "does not match"),
        ({"$": "nd", "sh": [1], "i": 0}, bytes(1), "dtype"),
        (_nd("|u1", [2], scalar=True), bytes(2), "scalar of 2"),
    ],
)
def test_malformed_arrays_are_refused_before_allocating(
    node: dict[str, Any], data: bytes, message: str
) -> None:
    with pytest.raises(codec.DecodeError, match=message):
        arrays.decode(node, bytearray(data), None)


def _peak(decode: Callable[[], Any]) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        value = decode()
        return value, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_large_array_without_numpy_is_a_view_of_its_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    size = 4 << 20  # 4 MiB of u1: four times the list bound
    data = bytearray(range(256)) * (size // 256)
    node = _nd("|u1", [size // 1024, 1024])
    view, peak = _peak(lambda: codec.decode(node, [data], _no_references, lambda name: None))
    assert isinstance(view, memoryview) and view.obj is data  # no copy
    rows: Any = view.tolist()
    assert view.shape == (size // 1024, 1024) and view.format == "B"
    assert rows[1][2] == 2 and rows[3][255] == 255
    assert peak < 64 << 10  # a view object, not the values
    # The old decoding, lists whatever the size: at least a pointer per byte.
    monkeypatch.setattr(arrays, "LIST_ITEMS", 1 << 62)
    rows, old_peak = _peak(lambda: codec.decode(node, [data], _no_references, lambda name: None))
    assert isinstance(rows, list) and len(rows) == size // 1024
    assert old_peak > 8 * size


def test_numpy_comes_from_the_programs_own_import_only(
    monkeypatch: pytest.MonkeyPatch, planted: Callable[[str], Path]
) -> None:
    """A client whose program never imported numpy reads arrays without it: a numpy the worker
    planted in the program's directory is never imported to read one."""
    import numpy  # (the test's own; taken away below, as for a program that never imports it)

    monkeypatch.delitem(sys.modules, "numpy")
    marker = planted("numpy")
    value = proxy.decode(_nd("|u1", [3]), [bytearray(b"\x01\x02\x03")])
    assert value == [1, 2, 3] and not marker.exists()
    with pytest.raises(AttributeError):  # it is no numpy, but it ran
        codec.decode(_nd("|u1", [3]), [bytearray(3)], _no_references, codec.importing)
    assert marker.exists()  # the importing policy (the worker's, or the old client) runs it
    sys.modules["numpy"] = numpy  # the program's own import: then arrays are numpy arrays
    assert isinstance(proxy.decode(_nd("|u1", [3]), [bytearray(3)]), numpy.ndarray)
