"""Understand a runc command line just enough to find the subcommand, bundle and log file.

runc (urfave/cli) accepts ``-flag`` and ``--flag``, values as ``--flag v`` or ``--flag=v``,
global flags before the subcommand, and the bundle as ``--bundle``/``-b`` (default: the cwd).

This runs on every runc call an engine makes, so it imports nothing beyond ``os``.
"""

from __future__ import annotations

import os

# Not typing.TYPE_CHECKING: importing typing costs milliseconds on every container start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional, Sequence

__all__ = ["SPEC_SUBCOMMANDS", "RuncArgs", "parse"]

#: Global runc flags that take a value.
_GLOBAL_VALUE_FLAGS = frozenset({"root", "log", "log-format", "criu", "rootless"})
#: create/run flags that take a value (the bundle is handled apart).
_COMMAND_VALUE_FLAGS = frozenset({"console-socket", "pid-file", "preserve-fds"})
_BUNDLE_FLAGS = frozenset({"bundle", "b"})
SPEC_SUBCOMMANDS = frozenset({"create", "run"})


class RuncArgs:
    """The parts of a runc command line Radium acts on."""

    __slots__ = ("bundle", "log_file", "log_format", "subcommand")

    def __init__(
        self,
        subcommand: str,
        log_file: str = "",
        log_format: str = "text",
        bundle: Optional[str] = None,
    ) -> None:
        self.subcommand = subcommand
        self.log_file = log_file
        self.log_format = log_format
        #: The bundle directory, for create and run only.
        self.bundle = bundle

    @property
    def edits_spec(self) -> bool:
        return self.subcommand in SPEC_SUBCOMMANDS


def _split(arg: str) -> tuple[str, Optional[str]]:
    """``--name=value`` -> (name, value); ``-name`` -> (name, None)."""
    name = arg.lstrip("-")
    if "=" in name:
        key, value = name.split("=", 1)
        return key, value
    return name, None


def parse(argv: Sequence[str], cwd: Optional[str] = None) -> RuncArgs:
    """Parse runc's arguments (without argv[0])."""
    globals_: dict[str, str] = {}
    index = 0
    while index < len(argv):
        arg = argv[index]
        if arg == "--" or not arg.startswith("-") or arg == "-":
            break
        name, value = _split(arg)
        if name in _GLOBAL_VALUE_FLAGS and value is None:
            index += 1
            value = argv[index] if index < len(argv) else ""
        if value is not None:
            globals_[name] = value
        index += 1
    if index < len(argv) and argv[index] == "--":
        index += 1
    subcommand = argv[index] if index < len(argv) else ""
    bundle = _find_bundle(argv[index + 1 :], cwd) if subcommand in SPEC_SUBCOMMANDS else None
    return RuncArgs(
        subcommand=subcommand,
        log_file=globals_.get("log", ""),
        log_format=globals_.get("log-format", "text"),
        bundle=bundle,
    )


def _find_bundle(args: Sequence[str], cwd: Optional[str]) -> str:
    bundle: Optional[str] = None
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            break
        if arg.startswith("-") and arg != "-":
            name, value = _split(arg)
            if name in _BUNDLE_FLAGS | _COMMAND_VALUE_FLAGS and value is None:
                index += 1
                value = args[index] if index < len(args) else ""
            if name in _BUNDLE_FLAGS:
                bundle = value
        index += 1
    base = cwd if cwd is not None else os.getcwd()
    return os.path.join(base, bundle) if bundle else base
