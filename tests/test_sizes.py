"""Size and surface: no product module over 300 lines, no function over 60 (issue 38 §5).

A module that outgrows the limit has grown a second job, and is split along it; the limit is a
line count so that nobody argues with it. Generated protobuf modules are not ours to size.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.test_layers import modules

MAX_MODULE_LINES = 300
MAX_FUNCTION_LINES = 60


def oversized(name: str, source: str) -> list[str]:
    """What in one module is over the limits, one line each."""
    found = []
    lines = source.count("\n")
    if lines > MAX_MODULE_LINES:
        found.append(f"{name}: {lines} lines")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                found.append(f"{name}:{node.lineno} {node.name}: {length} lines")
    return found


def product() -> dict[str, Path]:
    return {n: p for n, p in modules().items() if not n.endswith(("_pb2", "_pb2_grpc"))}


def test_no_product_module_or_function_is_over_the_limits() -> None:
    found = [line for n, p in sorted(product().items()) for line in oversized(n, p.read_text())]
    assert found == []


def test_the_walk_sees_every_part_of_the_product() -> None:
    names = product()
    for module in ("radium.config", "radium.pool.core.dispatcher", "radium_interposer.client"):
        assert module in names
    assert not any(n.startswith("radium.proto.") and n.endswith("_pb2") for n in names)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("x = 1\n" * 301, ["m: 301 lines"]),
        ("x = 1\n" * 300, []),
        ("def f():\n" + "    x = 1\n" * 60, ["m:1 f: 61 lines"]),
        ("async def g():\n" + "    x = 1\n" * 59, []),
    ],
)
def test_the_check_would_catch_a_module_or_a_function_over_the_limit(
    source: str, expected: list[str]
) -> None:
    assert oversized("m", source) == expected
