"""What to remote, as the user writes it: ``RADIUM_REMOTE`` entries (``torch``,
``app.model:train_step``) and the split file (``RADIUM_SPLIT``, TOML: ``modules``,
``functions``, ``environment``), checked strictly (docs/remoting.md, "Split files")."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Sequence, Set, Tuple

__all__ = ["SplitError", "parse_entries", "read_split"]

_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


class SplitError(ValueError):
    """The remote list or split file is malformed."""


def parse_entries(entries: Sequence[str]) -> Tuple[Set[str], Dict[str, List[str]]]:
    """The modules, and the functions by module, that ``entries`` name."""
    modules: Set[str] = set()
    functions: Dict[str, List[str]] = {}
    for raw in entries:
        entry = raw.strip()
        if not entry:
            continue
        module, _, function = entry.partition(":")
        if not _MODULE.match(module) or (function and not function.isidentifier()):
            raise SplitError(f"{entry!r} is neither a module nor module:function")
        if function:
            functions.setdefault(module, []).append(function)
        else:
            modules.add(module)
    return modules, functions


def read_split(path: str) -> Tuple[List[str], List[str]]:
    """``modules`` and ``functions`` of a split file (TOML; a small subset on Python < 3.11),
    and its ``environment``: the variables (fnmatch patterns) remoted functions see."""
    with open(path, "rb") as f:
        text = f.read().decode("utf-8")
    try:
        import tomllib  # type: ignore[import-not-found,unused-ignore]

        data = tomllib.loads(text)
    except ImportError:
        data = _parse_lists(text)
    except ValueError as exc:
        raise SplitError(f"split file {path}: {exc}") from None
    unknown = set(data) - {"modules", "functions", "environment"}
    if unknown:
        raise SplitError(f"split file {path}: unknown key {sorted(unknown)[0]!r}")
    lists: Dict[str, List[str]] = {}
    for key in ("modules", "functions", "environment"):
        values = data.get(key, [])
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise SplitError(f"split file {path}: {key} must be a list of strings")
        lists[key] = values
    if any(":" not in v for v in lists["functions"]):
        raise SplitError(f"split file {path}: functions are written module:function")
    return lists["modules"] + lists["functions"], lists["environment"]


def _parse_lists(text: str) -> Dict[str, Any]:
    """``key = ["a", "b"]`` (lists may span lines, # comments): all a split file needs."""
    body = re.sub(r"#[^\n\"]*", "", text)
    data: Dict[str, Any] = {}
    for match in re.finditer(r"(?m)^\s*([A-Za-z_]+)\s*=\s*\[([^\]]*)\]", body):
        data[match.group(1)] = re.findall(r'"([^"\\]*)"', match.group(2))
    leftover = re.sub(r"(?m)^\s*([A-Za-z_]+)\s*=\s*\[([^\]]*)\]", "", body).strip()
    if leftover:
        raise SplitError(f"cannot read {leftover.splitlines()[0]!r} (expected key = [...])")
    return data
