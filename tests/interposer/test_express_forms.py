"""A plan's values read by its compiled form (express_forms): the record's slot values in the
template's order, None for a call that does not fit, and the client's values never source."""

from __future__ import annotations

from typing import Any, Dict, List

from radium_interposer.express_forms import (
    CONSTANT,
    FLOAT,
    HANDLE,
    INT,
    ITSELF,
    NO_SLOT,
    OWNER,
    form,
)


class Proxy:
    def __init__(self, ref: Dict[str, Any], conn: Any = None) -> None:
        self.ref, self.conn = ref, conn


class Origin:
    """Another thread's connection with calls not yet answered: it is synced first."""

    def __init__(self) -> None:
        self.unsynced, self.synced = 2, 0

    def sync(self, quiet: bool) -> None:
        assert quiet
        self.unsynced, self.synced = 0, self.synced + 1


def values(callable_: int, name: Any, parts: List[Any], keywords: int = 0) -> Any:
    return form(callable_, name, parts, keywords, lambda p: p.ref, lambda p: p.conn)


def handle(n: int, conn: Any = None) -> Proxy:
    return Proxy({"$": "h", "id": n}, conn)


PATH = {"$": "p", "p": "torch.add"}


def test_every_part_in_the_template_s_order() -> None:
    read = values(
        NO_SLOT,
        "torch.add",
        [(HANDLE, None), (INT, None), (FLOAT, None), (CONSTANT, "mean")],
        keywords=2,
    )
    conn = object()
    got = read(PATH, (handle(5), 3), {"alpha": 0.5, "reduction": "mean"}, conn)
    assert got == (5, 3, 0.5)
    method = values(OWNER, "add", [(HANDLE, None)])
    assert method({"$": "a", "o": {"$": "h", "id": 9}, "n": "add"}, (handle(6),), {}, conn) == (
        9,
        6,
    )
    itself = values(ITSELF, None, [(INT, None)])
    assert itself({"$": "h", "id": 8}, (4,), {}, conn) == (8, 4)
    assert values(NO_SLOT, "torch.seed", [])({"$": "p", "p": "torch.seed"}, (), {}, conn) == ()


def test_a_call_that_does_not_fit_reads_none() -> None:
    read = values(NO_SLOT, "torch.add", [(HANDLE, None), (INT, None), (CONSTANT, None)])
    conn = object()
    assert read({"$": "p", "p": "torch.sub"}, (handle(5), 1, None), {}, conn) is None
    assert read(PATH, (Proxy({"$": "sv"}), 1, None), {}, conn) is None  # no handle
    assert read(PATH, (handle(5), 1 << 63, None), {}, conn) is None  # past int64
    assert read(PATH, (handle(5), -(1 << 63), None), {}, conn) == (5, -(1 << 63))
    assert read(PATH, (handle(5), 1, False), {}, conn) is None  # another constant
    method = values(OWNER, "add", [])
    assert method({"$": "a", "o": {"$": "h", "id": 9}, "n": "sub"}, (), {}, conn) is None
    assert method({"$": "a", "o": {"$": "p", "p": "x"}, "n": "add"}, (), {}, conn) is None


def test_a_handle_of_another_connection_with_calls_in_flight_is_synced_first() -> None:
    read = values(NO_SLOT, "torch.add", [(HANDLE, None), (HANDLE, None)])
    conn, other = object(), Origin()
    assert read(PATH, (handle(1, conn), handle(2, other)), {}, conn) == (1, 2)
    assert other.synced == 1 and read(PATH, (handle(1), handle(2, other)), {}, conn) == (1, 2)
    assert other.synced == 1  # nothing in flight any more


def test_names_and_constants_are_values_never_source() -> None:
    hostile = '"] or __import__("os")._exit(3) or ["'
    read = values(OWNER, hostile, [(CONSTANT, hostile)])
    function = {"$": "a", "o": {"$": "h", "id": 1}, "n": hostile}
    assert read(function, (hostile,), {}, object()) == (1,)
    assert read(function, ("other",), {}, object()) is None
