"""Entry point of ``radium-hook STAGE`` (prestart, createRuntime, poststop).

runc runs this with the environment written into the hook entry, never the container's, and
with ``python -I`` so no PYTHON* variable or working directory can inject code. It never writes
to stdout; failures are one line on stderr, which runc passes on to the engine. A container
that asked nothing of Radium costs a JSON parse: everything else is imported only when needed.
"""

from __future__ import annotations

import sys

from radium.errors import RadiumError, UsageError

# Not typing.TYPE_CHECKING: importing typing costs milliseconds on every container start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional, Sequence

    from radium.hooks.state import State

__all__ = ["PROGRAM", "STAGES", "main", "run"]

STAGES = ("prestart", "createRuntime", "poststop")
PROGRAM = "radium-hook"


def run(stage: str, raw_state: bytes) -> int:
    """Run one hook stage for the container whose OCI state is ``raw_state``; the exit code."""
    from radium.hooks.state import parse_state

    if stage not in STAGES:
        raise UsageError(f"unknown hook stage {stage!r}", hint=f"use one of {', '.join(STAGES)}")
    state = parse_state(raw_state)
    if not state.wants_radium:
        return 0
    from radium import config as config_module
    from radium import logs

    config = config_module.load()
    logs.setup(PROGRAM, config.hook.log_file)
    if stage != "poststop":
        state = _users(state)
        if not state.wants_radium:
            return 0
    if stage == "poststop":
        from radium.hooks.cleanup import poststop

        poststop(state, config)
    else:
        from radium.hooks.inject import prestart

        prestart(state, config)
    return 0


def _users(state: State) -> State:
    """Only what the user asked: podman's image annotations dropped, each drop logged."""
    import logging

    from radium.hooks.state import without_image_annotations
    from radium.shim.pods import claim_of

    notes: list[str] = []
    state = without_image_annotations(state, notes)
    claim_of(state.annotations)  # hooks.d mode: a radium.io/claim only kubelet's CDI gave
    for note in notes:
        logging.getLogger(__name__).info("container %s: %s", state.container_id, note)
    return state


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``radium-hook STAGE``, the OCI state on standard input."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        return run(args[0] if args else "", sys.stdin.buffer.read())
    except RadiumError as exc:
        message, status = exc.one_line(), 1
    except Exception as exc:  # a bug: the traceback goes to the log file, one line to the user
        if "logging" in sys.modules:
            sys.modules["logging"].getLogger(__name__).exception("internal error")
        message, status = f"internal error ({type(exc).__name__}: {exc}); see the hook log", 2
    if "logging" in sys.modules and sys.modules["logging"].getLogger().handlers:
        sys.modules["logging"].getLogger(__name__).error("%s", message)
    else:
        sys.stderr.write(f"{PROGRAM}: {message}\n")
    return status
