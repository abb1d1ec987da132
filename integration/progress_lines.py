"""One line per step of a long build, on stderr (stdout stays the caller's: scripts parse it).

A cold machine spends minutes in debootstrap; without these lines that is minutes of silence.
A tool's own chatter is summarised: its line is shown when its step changes (debootstrap's
``I: Retrieving ...`` for 80 packages is one line), warnings and errors always.
"""

from __future__ import annotations

import collections
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

#: Lines of a tool's output kept for the message of its failure.
TAIL = 25


def say(program: str, text: str) -> None:
    """``program: text`` on stderr, at once."""
    print(f"{program}: {text}", file=sys.stderr, flush=True)


def steps(lines: Iterable[str], step: Callable[[str], str | None]) -> Iterable[str]:
    """The lines that begin a new step (``step(line)`` names a line's step, None for a line
    that is no step: shown only if it is a warning or an error)."""
    last = None
    for line in lines:
        name = step(line)
        if name is None:
            if line.startswith(("W:", "E:", "WARNING", "ERROR")):
                yield line
            continue
        if name != last:
            last = name
            yield line


def debootstrap_step(line: str) -> str | None:
    """debootstrap's step: the verb of its ``I: Verb ...`` lines."""
    if not line.startswith("I: "):
        return None
    words = line.split()
    return words[1] if len(words) > 1 else None


def run_with_steps(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None,
    show: Callable[[str], None],
    step: Callable[[str], str | None],
) -> tuple[int, list[str]]:
    """Run ``argv`` (stdin closed, stdout and stderr together), ``show``-ing one line per step
    with the seconds since the start; its exit status and its last :data:`TAIL` lines."""
    started = time.monotonic()
    tail: collections.deque[str] = collections.deque(maxlen=TAIL)
    with subprocess.Popen(
        list(argv),
        env=dict(env) if env is not None else None,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    ) as process:
        assert process.stdout is not None

        def kept() -> Iterable[str]:
            assert process.stdout is not None
            for line in process.stdout:
                tail.append(line.rstrip("\n"))
                yield tail[-1]

        for line in steps(kept(), step):
            show(f"{line}  ({time.monotonic() - started:.0f}s)")
    return process.returncode, list(tail)
