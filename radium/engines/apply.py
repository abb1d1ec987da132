"""Carry out a :class:`~radium.engines.base.Plan`: atomically, with backups, or as a dry run.

Before Radium first edits a shared file it keeps the original next to it (``.radium-backup``, or
an empty ``.radium-absent`` marker when there was no file). ``--remove`` restores that original
byte for byte when the file is exactly as Radium left it; when someone changed it since, only
Radium's settings are taken out.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from radium.engines.base import Edit, Owned, Plan

__all__ = ["ABSENT", "BACKUP", "Outcome", "install", "remove"]

BACKUP = ".radium-backup"
ABSENT = ".radium-absent"


@dataclass(frozen=True)
class Outcome:
    """What applying a plan did to one file."""

    path: Path
    #: "written", "unchanged", "deleted", "restored", "absent"
    action: str
    #: The content the file has (or would have, in a dry run) afterwards; None when deleted.
    content: Optional[bytes]


def _read(path: Path) -> Optional[bytes]:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _write(path: Path, content: bytes, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        mode = path.stat().st_mode & 0o7777
    tmp = path.with_name(f".{path.name}.radium-{os.getpid()}")
    tmp.write_bytes(content)
    tmp.chmod(mode)
    os.replace(tmp, path)


def _sidecar(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def install(plan: Plan, *, dry_run: bool = False) -> list[Outcome]:
    """Write the plan's files (only say what would change, with ``dry_run``)."""
    outcomes = []
    for item in plan.files:
        current = _read(item.path)
        new = item.content if isinstance(item, Owned) else item.install(current)
        if new == current:
            outcomes.append(Outcome(item.path, "unchanged", current))
            continue
        if not dry_run:
            if isinstance(item, Edit) and not _has_backup(item.path):
                if current is None:
                    _write(_sidecar(item.path, ABSENT), b"")
                else:
                    _write(_sidecar(item.path, BACKUP), current)
            _write(item.path, new, item.mode if isinstance(item, Owned) else 0o644)
        outcomes.append(Outcome(item.path, "written", new))
    return outcomes


def _has_backup(path: Path) -> bool:
    return _sidecar(path, BACKUP).exists() or _sidecar(path, ABSENT).exists()


def remove(plan: Plan, *, dry_run: bool = False) -> list[Outcome]:
    """Take the plan's changes back out (only say what would change, with ``dry_run``)."""
    outcomes = []
    for item in plan.files:
        current = _read(item.path)
        if isinstance(item, Owned):
            if current is None:
                outcomes.append(Outcome(item.path, "absent", None))
                continue
            if not dry_run:
                item.path.unlink()
            outcomes.append(Outcome(item.path, "deleted", None))
            continue
        outcomes.append(_remove_edit(item, current, dry_run))
    return outcomes


def _remove_edit(item: Edit, current: Optional[bytes], dry_run: bool) -> Outcome:
    backup, absent = _sidecar(item.path, BACKUP), _sidecar(item.path, ABSENT)
    original: Optional[bytes] = _read(backup)
    had_backup = original is not None or absent.exists()
    if current is None:
        new, action = None, "absent"
    elif had_backup and item.install(original) == current:
        new, action = original, "restored"  # untouched since we wrote it: give back the original
    else:
        new = item.uninstall(current)
        action = "unchanged" if new == current else ("deleted" if new is None else "written")
    if not dry_run:
        if action in ("restored", "written", "deleted"):
            if new is None:
                item.path.unlink()
            else:
                _write(item.path, new)
        for sidecar in (backup, absent):
            sidecar.unlink(missing_ok=True)
    return Outcome(item.path, action, new)
