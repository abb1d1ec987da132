from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from radium.errors import NoBundleError
from radium.packaging import bundles


def test_build_two_bundles_with_manifests(tmp_path: Path) -> None:
    built = bundles.build(tmp_path, arch="x86_64")
    assert [m.name for m in built] == ["glibc-x86_64", "musl-x86_64"]
    for manifest in built:
        on_disk = bundles.verify(tmp_path / manifest.name)
        assert on_disk["libc"] == manifest.libc
        assert on_disk["arch"] == "x86_64"
        assert "python/radium_interposer/__init__.py" in on_disk["files"]
        assert len(on_disk["content_sha256"]) == 64
    assert sorted(p.name for p in tmp_path.iterdir()) == ["glibc-x86_64", "musl-x86_64"]


def test_rebuild_replaces_atomically(tmp_path: Path) -> None:
    bundles.build(tmp_path, libcs=["glibc"], arch="x86_64")
    (tmp_path / "glibc-x86_64" / "stale").write_text("x")
    bundles.build(tmp_path, libcs=["glibc"], arch="x86_64")
    assert not (tmp_path / "glibc-x86_64" / "stale").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["glibc-x86_64"]


def test_tampered_bundle_fails_verification(tmp_path: Path) -> None:
    bundles.build(tmp_path, libcs=["musl"], arch="x86_64")
    (tmp_path / "musl-x86_64" / "python" / "radium_interposer" / "__init__.py").write_text("evil")
    with pytest.raises(NoBundleError, match="does not match its manifest"):
        bundles.verify(tmp_path / "musl-x86_64")


def test_missing_and_corrupt_manifest(tmp_path: Path) -> None:
    with pytest.raises(NoBundleError, match="is not installed"):
        bundles.read_manifest(tmp_path / "glibc-x86_64")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "manifest.json").write_text("{")
    with pytest.raises(NoBundleError, match="unreadable"):
        bundles.read_manifest(tmp_path / "b")


def test_interposer_reports_its_bundle(tmp_path: Path) -> None:
    """The bundled interposer, run by a plain python with only the bundle on its path."""
    bundles.build(tmp_path, libcs=["glibc"], arch="x86_64")
    runtime_dir = tmp_path / "run"
    runtime_dir.mkdir()
    (runtime_dir / "info.json").write_text(
        json.dumps({"container_id": "c1", "platform": {"distro_id": "debian"}})
    )
    result = subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            "-c",
            f"import sys; sys.path.insert(0, {str(tmp_path / 'glibc-x86_64' / 'python')!r}); "
            "import runpy; runpy.run_module('radium_interposer', run_name='__main__')",
        ],
        capture_output=True,
        text=True,
        check=True,
        env={"RADIUM_RUNTIME_DIR": str(runtime_dir)},
    )
    report = json.loads(result.stdout)
    assert report["bundle"]["name"] == "glibc-x86_64"
    assert report["bundle"]["path"] == str(tmp_path / "glibc-x86_64")
    assert report["platform"] == {"distro_id": "debian"}
    assert report["container_id"] == "c1"


def test_cli_build_and_verify(tmp_path: Path) -> None:
    from radium.cli import main

    assert main(["bundles", "build", "--out", str(tmp_path), "--arch", "x86_64"]) == 0
    assert main(["bundles", "verify", "--dir", str(tmp_path)]) == 0
    assert main(["bundles", "verify", "--dir", str(tmp_path / "empty")]) == 1
