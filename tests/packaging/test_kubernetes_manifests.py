"""packaging/kubernetes/ validated offline against the Kubernetes API schemas (strict: an
unknown field fails), for the oldest release with DRA in GA (1.34) and the newest the
kubernetes-validate package carries."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

MANIFESTS = sorted((Path(__file__).parents[2] / "packaging" / "kubernetes").glob("*.yaml"))
VALIDATE = Path(sys.executable).with_name("kubernetes-validate")


def validate(path: Path, version: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # Run away from the repository root: its packaging/ would shadow PyPI's packaging module.
    return subprocess.run(
        [str(VALIDATE), "--strict", "-k", version, str(path)],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
        timeout=120,
    )


@pytest.mark.parametrize("version", ["1.34.0", "1.37.0"])
@pytest.mark.parametrize("manifest", MANIFESTS, ids=[m.name for m in MANIFESTS])
def test_manifest_is_valid(manifest: Path, version: str, tmp_path: Path) -> None:
    result = validate(manifest, version, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "passed" in result.stdout and "fail" not in result.stdout.lower()


def test_the_validator_catches_a_wrong_field(tmp_path: Path) -> None:
    broken = tmp_path / "pod.yaml"
    text = (Path(__file__).parents[2] / "packaging/kubernetes/example-pod.yaml").read_text()
    broken.write_text(text.replace("runtimeClassName:", "runtimeClass:"))
    result = validate(broken, "1.37.0", tmp_path)
    assert result.returncode != 0
    assert "runtimeClass" in result.stdout + result.stderr
