from __future__ import annotations

import os
from pathlib import Path

import pytest

from radium.engines.base import Options

GOLDEN = Path(__file__).parent / "golden"
PROGRAMS = {
    "radium-runtime": "/opt/radium/bin/radium-runtime",
    "radium-hook": "/opt/radium/bin/radium-hook",
    "containerd-shim-radium-v2": "/opt/radium/bin/containerd-shim-radium-v2",
    "radium-runtime-full": "/opt/radium/bin/radium-runtime-full",
    "containerd-shim-radium-v2-full": "/opt/radium/bin/containerd-shim-radium-v2-full",
    "radium-agent-call": "/opt/radium/bin/radium-agent-call",
    "python": "/opt/radium/bin/python3",
}


@pytest.fixture
def options() -> Options:
    return Options(programs=PROGRAMS)


def check_golden(name: str, content: bytes | None) -> None:
    """Compare with golden/NAME; RADIUM_UPDATE_GOLDEN=1 rewrites it (then review the diff)."""
    assert content is not None
    path = GOLDEN / name
    if os.environ.get("RADIUM_UPDATE_GOLDEN"):
        path.write_bytes(content)
    assert content.decode() == path.read_text(), f"differs from {path}"
