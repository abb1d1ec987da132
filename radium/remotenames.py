"""What ``radium exec`` and ``radium run`` are told to remote, checked before anything is leased.

- :func:`entries`: each ``--remote`` value (comma-separated, as ``RADIUM_REMOTE`` is read) and
  the split file's lists must be what the interposer accepts (``split_file.parse_entries``): a
  dotted module path, or ``module:function``. Otherwise one line, before a lease is taken.
- :func:`check_on_worker`: once ``radium exec`` holds the lease, and before its program runs,
  the worker is asked whether it can import each module (the ``find`` operation,
  docs/data-plane.md); a module it cannot is one line naming the closest one it can.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from radium.errors import InvalidRequestError, UnavailableError, UsageError

__all__ = ["CHECK_TIMEOUT", "GRAMMAR", "check_on_worker", "entries"]

#: How long the check waits for the worker (it starts on the lease's first connection).
CHECK_TIMEOUT = 120.0
GRAMMAR = "a dotted Python name: numpy.linalg, or app.model:train_step"


def entries(remote: Sequence[str], split: str | None = None) -> list[str]:
    """The remoted modules (not ``module:function`` entries: those are the user's own code,
    shipped to the worker when it lacks them); UsageError naming a malformed entry."""
    from radium_interposer.split_file import SplitError, parse_entries, read_split

    modules: set[str] = set()
    for value in remote:
        for entry in value.split(","):
            try:
                modules |= parse_entries([entry])[0]
            except SplitError:
                raise UsageError(
                    f"--remote {entry.strip()!r} is neither a module nor module:function "
                    f"({GRAMMAR})"
                ) from None
    if split:
        try:
            listed, _ = read_split(split)
            modules |= parse_entries(listed)[0]
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"--split {split}: {getattr(exc, 'strerror', None) or exc}") from None
        except SplitError as exc:
            raise UsageError(f"--split {split}: {exc}", hint=GRAMMAR) from None
    return sorted(modules)


def check_on_worker(runtime: Path, modules: Sequence[str]) -> None:
    """InvalidRequestError for the first module the lease's worker cannot import."""
    from radium_interposer import names
    from radium_interposer.errors import WorkerGone

    if not modules:
        return
    try:
        missing = names.ask(str(runtime / "dp.sock"), modules, CHECK_TIMEOUT)
    except WorkerGone as exc:
        reason = str(exc).removeprefix("radium: ")
        raise UnavailableError(f"cannot ask the lease's worker about --remote: {reason}") from None
    for module, near in sorted((missing or {}).items()):
        guess = f" (did you mean {near[0]!r}?)" if near else ""
        raise InvalidRequestError(f"the worker cannot import {module!r}{guess}")
