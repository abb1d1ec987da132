"""Bring every installed distribution's RECORD in line with its files (run by scripts/build-deb).

The build changes what pip installed: it strips the wheels' shared objects as Debian does and
drops the radium wheel's direct_url.json (a staging path). RECORD rows of removed files go and
changed files get their new hash and size, so ``pip check``-style tools and a later
``pip uninstall`` see a consistent environment.

    python3 record.py SITE_PACKAGES
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import sys
from pathlib import Path

__all__ = ["digest", "main", "sync"]


def digest(path: Path) -> str:
    """A file's digest as a wheel's RECORD writes it."""
    raw = hashlib.sha256(path.read_bytes()).digest()
    return "sha256=" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def sync(record: Path) -> int:
    """Rewrite ``record``; the number of rows changed or dropped."""
    site = record.parent.parent
    rows = list(csv.reader(io.StringIO(record.read_text(encoding="utf-8"))))
    kept: list[list[str]] = []
    changed = 0
    for row in rows:
        path = (site / row[0]).resolve() if row else None
        if path is None or not path.exists():
            changed += 1
            continue
        if len(row) == 3 and row[1] and row[1] != digest(path):
            row = [row[0], digest(path), str(path.stat().st_size)]
            changed += 1
        kept.append(row)
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(kept)
    record.write_text(out.getvalue(), encoding="utf-8")
    return changed


def main(argv: list[str]) -> int:
    """Bring every RECORD of a site directory in line with its files."""
    site = Path(argv[1])
    for record in sorted(site.glob("*.dist-info/RECORD")):
        sync(record)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
