"""Entry point of ``radium-hook STAGE`` (prestart, createRuntime, poststop).

runc runs this with the environment written into the hook entry, never the container's, and
through ``python -I`` so no PYTHON* variable or working directory can inject code. It never
writes to stdout; failures are one line on stderr, which runc passes on to the engine.
"""

from __future__ import annotations

import logging
import sys
from typing import Optional, Sequence

from radium import config as config_module
from radium import logs
from radium.errors import RadiumError, UsageError

log = logging.getLogger("radium.hooks")

STAGES = ("prestart", "createRuntime", "poststop")


def run(stage: str, raw_state: bytes) -> int:
    from radium.hooks.state import parse_state

    if stage not in STAGES:
        raise UsageError(f"unknown hook stage {stage!r}", hint=f"use one of {', '.join(STAGES)}")
    state = parse_state(raw_state)
    if not state.wants_radium:
        return 0
    config = config_module.load()
    logs.setup("radium-hook", config.hook.log_file)
    from radium.hooks import inject

    if stage == "poststop":
        inject.poststop(state, config)
    else:
        inject.prestart(state, config)
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    logs.setup("radium-hook", "")
    try:
        return run(args[0] if args else "", sys.stdin.buffer.read())
    except RadiumError as exc:
        log.error("%s", exc.one_line())
        return 1
    except Exception:
        log.exception("internal error; please report it with the hook log")
        return 2
