"""The one table gpu-check prints: a row per check, its result and its figures."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

__all__ = ["FAIL", "OK", "SKIP", "Row", "Table"]

OK, FAIL, SKIP = "ok", "FAIL", "skip"


@dataclasses.dataclass(frozen=True)
class Row:
    check: str
    result: str
    figures: str = ""


class Table:
    """Rows in the order the checks ran; failed when any row failed."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.rows: list[Row] = []

    def add(self, check: str, result: str, figures: str = "") -> Row:
        row = Row(check, result, figures)
        self.rows.append(row)
        return row

    def ok(self, check: str, figures: str = "") -> Row:
        return self.add(check, OK, figures)

    def judge(self, check: str, passed: bool, figures: str = "") -> Row:
        return self.add(check, OK if passed else FAIL, figures)

    @property
    def failed(self) -> bool:
        return any(row.result == FAIL for row in self.rows)

    def render(self) -> str:
        width = max([len(r.check) for r in self.rows] + [5])
        lines = [self.title, f"{'check':<{width}}  result  figures", "-" * (width + 40)]
        for row in self.rows:
            figures = row.figures.replace("\n", " | ")
            lines.append(f"{row.check:<{width}}  {row.result:<6}  {figures}".rstrip())
        verdict = "FAILED" if self.failed else "PASSED"
        failed = sum(r.result == FAIL for r in self.rows)
        lines.append(f"gpu-check {verdict}: {len(self.rows)} rows, {failed} failed")
        return "\n".join(lines) + "\n"

    def write(self, out: str | None = None) -> Path | None:
        """Into ``$OUT/gpu-check.txt`` when ``OUT`` is set (the device tool's folder)."""
        folder = out if out is not None else os.environ.get("OUT", "")
        if not folder:
            return None
        path = Path(folder) / "gpu-check.txt"
        path.write_text(self.render())
        return path
