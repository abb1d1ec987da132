"""Operation names live in one module (radium_interposer.ops), and the worker runs each of the
client's operations from an explicit table (no ``getattr`` on a name the client sent)."""

from __future__ import annotations

import ast
from pathlib import Path

from radium_interposer import ops
from radium_interposer.worker import Worker

SOURCES = Path(ops.__file__).parent


def literal_operations(path: Path) -> list[str]:
    """Where ``path`` spells an operation as a string: ``{"op": "call"}``, ``op == "ping"``,
    ``meta.get("op") != "import"``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if _is_str(key, "op") and _is_str(value):
                    found.append(f"{path.name}:{node.lineno}")
        elif (
            isinstance(node, ast.Compare)
            and _names_op(node.left)
            and any(_is_str(right) for right in node.comparators)
        ):
            found.append(f"{path.name}:{node.lineno}")
    return found


def _is_str(node: ast.AST | None, value: str | None = None) -> bool:
    if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        return False
    return value is None or node.value == value


def _names_op(node: ast.AST) -> bool:
    if isinstance(node, ast.Name):
        return node.id == "op"
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and bool(node.args)
        and _is_str(node.args[0], "op")
    )


def test_operations_are_named_only_in_ops() -> None:
    spelled = [
        where
        for path in sorted(SOURCES.glob("*.py"))
        if path.name != "ops.py"
        for where in literal_operations(path)
    ]
    assert spelled == []


def test_the_check_sees_a_spelled_operation(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        'meta = {"op": "ping"}\nif meta.get("op") == "call" or op != "x":\n    pass\n'
    )
    assert literal_operations(planted) == ["planted.py:1", "planted.py:2", "planted.py:2"]


def test_the_worker_runs_every_request_of_the_client_and_nothing_else() -> None:
    requests = {
        ops.CALL, ops.FETCH, ops.IMPORT, ops.ITEMS, ops.METHODS, ops.RETAIN, ops.ENSURE,
        ops.DEFINE, ops.FIND, ops.SHIP, ops.STATS, ops.PING,
    }  # fmt: skip
    worker = Worker()
    assert set(worker.operations) == requests
    assert requests > ops.READS
    # the worker's own requests to the client are not operations it runs
    assert not {ops.CALLBACK, ops.OPEN, ops.FILE, ops.FS, ops.FILE_OBJECT} & set(worker.operations)
