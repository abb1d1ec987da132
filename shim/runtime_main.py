"""Entry point of ``radium-runtime``: pass-through calls never import the spec machinery."""

from __future__ import annotations

import os
import sys

# Not typing.TYPE_CHECKING: importing typing costs milliseconds on every container start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional, Sequence


__all__ = ["main"]


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``radium-runtime``: runc's command line, a Radium container's spec edited on create."""
    from radium.shim.argv import parse

    args = list(sys.argv if argv is None else argv)
    parsed = parse(args[1:])
    if not parsed.edits_spec:
        from radium.shim.passthrough import exec_runtime

        return exec_runtime(args, os.environ)
    from radium.shim.runtime import run

    return run(args, os.environ, parsed)
