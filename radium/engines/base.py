"""What an engine writer produces: files to edit or own, and the daemon to restart."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Union

__all__ = ["Edit", "Options", "Owned", "Plan"]


@dataclass(frozen=True)
class Edit:
    """A file Radium shares with others: edited in place, backed up, restorable."""

    path: Path
    #: Current content (None: no such file) -> content with Radium's settings.
    install: Callable[[Optional[bytes]], bytes]
    #: Current content -> content without Radium's settings (None: delete the file).
    uninstall: Callable[[bytes], Optional[bytes]]


@dataclass(frozen=True)
class Owned:
    """A file Radium owns outright (a drop-in): written on install, deleted on remove."""

    path: Path
    content: bytes
    mode: int = 0o644


@dataclass(frozen=True)
class Options:
    """What the user asked ``radium setup`` for."""

    set_as_default: bool = False
    #: Installed Radium programs by name: radium-runtime, radium-hook, containerd-shim-radium-v2,
    #: and "python" (the interpreter the hook runs under).
    programs: dict[str, str] = field(default_factory=dict)
    #: The Radium config file to point hooks at when it is not the default ("": default).
    config_file: str = ""


@dataclass(frozen=True)
class Plan:
    """What setting an engine up changes: the files, and the daemon to restart."""

    files: tuple[Union[Edit, Owned], ...]
    #: The systemd unit to restart for the change to take effect ("" when none is needed).
    restart_unit: str
    #: What to tell the user about making the change take effect.
    restart_hint: str
