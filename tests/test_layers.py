"""The product's layers, read from its imports: no cycle between its parts, and the pool's wings
each import only the wings before them (pool/__init__.py, docs/design.md §4.5).

Every import counts, deferred and ``TYPE_CHECKING`` ones too: a type-only import is still an
arrow a reader must follow back.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Where each package's files are (pyproject's package-dir).
TREES = {
    "radium": "radium",
    "radium.pool": "pool",
    "radium.acceptor": "acceptor",
    "radium.hooks": "hooks",
    "radium.shim": "shim",
    "radium.agent": "agent",
    "radium.packaging": "packaging",
    "radium_interposer": "interposer/radium_interposer",
}
#: The command line and what implements its commands: it drives every part, so it sits on top.
FRONT = (
    "radium.cli",
    "radium.commands",
    "radium.dockerrun",
    "radium.doctor",
    "radium.engines",
    "radium.execute",
    "radium.up",
    "radium.upservices",
    "radium.upconfig",
)
PARTS = tuple(TREES)[1:]
#: The pool's wings, lowest first: each may import only itself and those before it.
WINGS = ("model", "store", "core", "leases", "api")

Edge = tuple[str, str]


def modules() -> dict[str, Path]:
    """Every product module by its import name."""
    found: dict[str, Path] = {}
    for package, tree in TREES.items():
        for path in (ROOT / tree).rglob("*.py"):
            parts = [p for p in path.relative_to(ROOT / tree).with_suffix("").parts]
            if package == "radium" and parts[0] in ("pool", "acceptor", "hooks", "shim", "agent"):
                continue  # not there in a checkout; mapped from its own tree
            name = ".".join([package, *(p for p in parts if p != "__init__")])
            found[name] = path
    return found


def imports(path: Path, known: Mapping[str, Path]) -> Iterator[str]:
    """The product modules ``path`` imports (a package's ``from p import m`` names p.m)."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            named = [f"{node.module}.{alias.name}" for alias in node.names]
            yield from (m for m in [node.module, *named] if m in known)
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name in known)


@functools.cache
def graph() -> frozenset[Edge]:
    known = modules()
    return frozenset(
        (name, target) for name, path in known.items() for target in imports(path, known)
    )


def part(module: str) -> str:
    """The node a module belongs to: one of :data:`PARTS`, the front, or radium's library."""
    for package in PARTS:
        if module == package or module.startswith(package + "."):
            return package
    if any(module == f or module.startswith(f + ".") for f in FRONT):
        return "radium (front)"
    return "radium (library)"


def wing(module: str) -> str | None:
    """The pool wing of a module, or None outside the pool's wings."""
    parts = module.split(".")
    if parts[:2] != ["radium", "pool"] or len(parts) < 3:
        return None
    return parts[2] if parts[2] in WINGS else None


def cycles(edges: Iterable[Edge]) -> list[set[str]]:
    """The groups of more than one node that each reach one another (a few hundred nodes:
    reachability from each is fast enough)."""
    after: dict[str, set[str]] = {}
    for a, b in edges:
        after.setdefault(a, set())
        after.setdefault(b, set())
        if a != b:
            after[a].add(b)
    nodes = sorted(after)
    reach = {n: _reachable(n, after) for n in nodes}
    groups: list[set[str]] = []
    for n in nodes:
        group = {m for m in reach[n] if n in reach[m]} | {n}
        if len(group) > 1 and group not in groups:
            groups.append(group)
    return groups


def _reachable(start: str, after: Mapping[str, set[str]]) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in after[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def back_arrows(edges: Iterable[Edge]) -> list[Edge]:
    """Imports from a pool wing into a later one."""
    wrong = []
    for a, b in edges:
        wa, wb = wing(a), wing(b)
        if wa and wb and WINGS.index(wb) > WINGS.index(wa):
            wrong.append((a, b))
    return sorted(wrong)


def between_parts(edges: Iterable[Edge]) -> set[Edge]:
    return {(part(a), part(b)) for a, b in edges if part(a) != part(b)}


def test_the_walk_sees_the_product() -> None:
    edges = graph()
    assert ("radium.pool.api.server", "radium.pool.core.dispatcher") in edges
    assert ("radium.pool.leases.front", "radium.leaseclient.wire") in edges
    assert ("radium.hooks.inject", "radium.shim.request") in edges  # a deferred one
    assert len({a for a, _ in edges}) > 150


def test_no_cycle_between_the_product_s_parts() -> None:
    found = cycles(between_parts(graph()))
    assert found == [], f"import cycles between parts: {found}"


def test_the_pool_s_wings_import_only_earlier_wings() -> None:
    assert back_arrows(graph()) == []


def test_the_pool_s_wings_have_no_cycle() -> None:
    edges = {(wing(a), wing(b)) for a, b in graph() if wing(a) and wing(b)}
    assert cycles({(str(a), str(b)) for a, b in edges}) == []


def test_no_cycle_between_the_modules_of_a_part() -> None:
    """Within each part too, a module's imports lead away from it: the interposer's lower
    layers reach its upper ones only through the upcalls its wiring binds (upcalls.py)."""
    for node in ("radium (library)", *PARTS):
        assert within(graph(), node) == [], node


def within(edges: Iterable[Edge], node: str) -> list[set[str]]:
    """The cycles between the modules of one part (its package's ``__init__`` aside)."""
    inside = {(a, b) for a, b in edges if part(a) == part(b) == node and a != b}
    return cycles({(a, b) for a, b in inside if b not in TREES and b != "radium"})


def test_the_library_imports_no_part_but_the_interposer() -> None:
    """radium's own modules (errors, config, rpc, ...) are what every part stands on."""
    above = {b for a, b in between_parts(graph()) if a == "radium (library)"}
    assert above <= {"radium_interposer"}


def test_the_checks_catch_what_they_are_for() -> None:
    """Each check, given the arrow it exists to refuse, refuses it."""
    edges = graph()
    # the review's circle: leasing reached back for the coordinator in the servicer module
    planted = edges | {("radium.pool.core.state", "radium.pool.leases.leasing")}
    assert back_arrows(planted) == [("radium.pool.core.state", "radium.pool.leases.leasing")]
    planted = edges | {("radium.pool.store.sqlite", "radium.pool.core.state")}
    assert back_arrows(planted)
    assert {"store", "core"} in cycles(
        {(str(wing(a)), str(wing(b))) for a, b in planted if wing(a) and wing(b)}
    )
    planted = edges | {("radium.pool.core.state", "radium.acceptor.slots")}
    assert cycles(between_parts(planted)) == [{"radium.acceptor", "radium.pool"}]
    # the circle the node agent had with the hook while both its client and it lived in shim/
    planted = edges | {("radium.hooks.inject", "radium.agent.starts")}
    assert cycles(between_parts(planted)) == [{"radium.agent", "radium.hooks"}]
    planted = edges | {("radium.rpc", "radium.shim.specedit")}
    assert "radium.shim" in {b for a, b in between_parts(planted) if a == "radium (library)"}
    # the review's other circle, demand and placement, gone with core/free.py
    planted = edges | {("radium.pool.core.demand", "radium.pool.core.placement")}
    assert within(planted, "radium.pool") != []
    # the interposer's knot: an error's class looked up in the stand-ins' module, and the
    # connection running callbacks itself
    for upward in (
        ("radium_interposer.errors", "radium_interposer.classes"),
        ("radium_interposer.client", "radium_interposer.client_serving"),
    ):
        assert within(edges | {upward}, "radium_interposer") != [], upward
    assert cycles([("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]) == [{"a", "b", "c"}]
