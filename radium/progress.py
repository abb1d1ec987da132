"""Live per-acceptor progress bars on a terminal; one line per change elsewhere (logs, CI)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TextIO

__all__ = ["WIDTH", "Bars", "bar"]

WIDTH = 30


def bar(row: Any) -> str:
    """One acceptor's progress with an image, as a text bar."""
    filled = round(row.progress * WIDTH)
    tail = f": {row.error}" if row.error else ""
    return (
        f"{row.acceptor:<18} [{'#' * filled}{'.' * (WIDTH - filled)}] "
        f"{row.progress * 100:5.1f}%  {row.state}{tail}"
    )


class Bars:
    """Progress bars redrawn in place on a terminal, printed once each elsewhere."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.tty = out.isatty()
        self.drawn = 0
        self.seen: dict[str, tuple[str, int]] = {}

    def update(self, rows: Sequence[Any]) -> None:
        if self.tty:
            if self.drawn:
                self.out.write(f"\x1b[{self.drawn}F")
            for row in rows:
                self.out.write(bar(row) + "\x1b[K\n")
            self.drawn = len(rows)
        else:
            for row in rows:
                key = (row.state, int(row.progress * 4))  # quarters: a few lines per pull
                if self.seen.get(row.acceptor) != key:
                    self.seen[row.acceptor] = key
                    self.out.write(bar(row) + "\n")
        self.out.flush()
