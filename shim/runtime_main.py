"""Entry point of ``radium-runtime``."""

from __future__ import annotations

import os
import sys
from typing import Optional, Sequence


def main(argv: Optional[Sequence[str]] = None) -> int:
    from radium.shim.runtime import run

    return run(list(sys.argv if argv is None else argv), os.environ)
