"""The ``radium`` command line: a parser assembled from :mod:`radium.commands`."""

from __future__ import annotations

import argparse
import logging
import os
import select
import sys
from collections.abc import Iterator
from typing import Optional, Sequence

from radium import __version__, config, logs
from radium.commands import (
    agent,
    bundles,
    certs,
    daemons,
    doctor,
    dra,
    exec_local,
    images,
    inspect,
    queues,
    run,
    setup,
    top,
    up,
)
from radium.errors import RadiumError

__all__ = ["EXIT_PIPE_CLOSED", "build_parser", "main", "subcommands"]

log = logging.getLogger("radium.cli")
#: The exit status of a command whose reader went away (``radium leases | head -1``): the
#: status the shell reports for ``ls`` or ``cat`` killed by SIGPIPE there (128 + 13). Not 0:
#: the output was cut short, and ``set -o pipefail`` scripts see what coreutils would give.
EXIT_PIPE_CLOSED = 141


def subcommands(
    parser: argparse.ArgumentParser, name: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser, str]]:
    """Every subcommand under ``parser``, depth first: its words (``("images", "ls")``), its
    parser and the help its parent lists it with."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for word, sub in action.choices.items():
                yield (*name, word), sub, helps.get(word, "")
                yield from subcommands(sub, (*name, word))


def build_parser() -> argparse.ArgumentParser:
    """The ``radium`` command line: every subcommand's parser."""
    parser = argparse.ArgumentParser(
        prog="radium", description="Remote, pooled GPUs for unmodified containers."
    )
    parser.add_argument("--version", action="version", version=f"radium {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (
        bundles, setup, daemons, inspect, top, queues, images, agent, exec_local, run, doctor,
        up, certs, dra,
    ):  # fmt: skip
        module.register(commands)
    for _, sub, text in subcommands(parser):
        # `radium X --help` opens with what `radium --help` lists X as, unless X says more.
        if not sub.description and text:
            sub.description = text[:1].upper() + text[1:] + "."
        # Whose usage a stray argument is reported with (main): the subcommand's own.
        sub.set_defaults(command_parser=sub)
    return parser


def _dispatch(argv: Optional[Sequence[str]]) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # argparse would print the top-level usage for `radium leases --bogus`
        getattr(args, "command_parser", parser).error(f"unrecognized arguments: {' '.join(extra)}")
    config.find_up_config()  # `radium up --detach`, then any command, with no export
    logs.setup("radium", "", stderr_level=logging.WARNING)
    try:
        return int(args.func(args))
    except RadiumError as exc:
        log.error("%s", exc.one_line())
        return 1
    except KeyboardInterrupt:
        return 130


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run one ``radium`` command; its exit status. A closed stdout ends it quietly."""
    try:
        try:
            return _dispatch(argv)
        finally:
            # Here, not at exit, where a reader gone would print "Exception ignored".
            sys.stdout.flush()
    except BrokenPipeError:
        if not _stdout_closed():  # a socket's broken pipe is a bug to show, not a quiet exit
            raise
        # Python's documented way: what is still buffered goes nowhere at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_PIPE_CLOSED


def _stdout_closed() -> bool:
    """Whether stdout is a pipe or socket whose reader has gone (poll says POLLERR)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):  # replaced by a test's capture, say
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


if __name__ == "__main__":
    sys.exit(main())
