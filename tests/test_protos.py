"""The generated gRPC modules are what scripts/protos makes from the .proto files today."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]


def test_generated_modules_are_fresh(tmp_path: Path) -> None:
    protos = sorted(
        p.relative_to(ROOT)
        for where in ("radium/proto", "integration/cri")
        for p in (ROOT / where).glob("*.proto")
    )
    assert protos
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            "-I",
            str(ROOT),
            f"--python_out={tmp_path}",
            f"--pyi_out={tmp_path}",
            f"--grpc_python_out={tmp_path}",
            *map(str, protos),
        ],
        check=True,
        cwd=ROOT,
    )
    generated = sorted(tmp_path.rglob("*_pb2*"))
    assert generated
    for fresh in generated:
        committed = ROOT / fresh.relative_to(tmp_path)
        assert committed.exists(), f"{committed} is missing: run scripts/protos"
        assert committed.read_bytes() == fresh.read_bytes(), (
            f"{committed} is stale: run scripts/protos"
        )
