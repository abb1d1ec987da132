from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from radium.shim import containerd, pods


@pytest.mark.parametrize(
    ("argv", "action", "flags"),
    [
        (
            [
                "-namespace",
                "k8s.io",
                "-address",
                "/run/c.sock",
                "-publish-binary",
                "/usr/bin/containerd",
                "-id",
                "abc",
                "start",
            ],
            "start",
            {"namespace": "k8s.io", "id": "abc"},
        ),
        (
            ["--namespace=default", "-id=abc", "-bundle", "/b", "-debug", "delete"],
            "delete",
            {"namespace": "default", "id": "abc", "bundle": "/b", "debug": ""},
        ),
        (["-v"], "", {"v": ""}),
        (["-namespace", "n", "-id", "x"], "", {"namespace": "n", "id": "x"}),
    ],
)
def test_parse(argv: list[str], action: str, flags: dict[str, str]) -> None:
    parsed_action, parsed_flags = containerd.parse(argv)
    assert parsed_action == action
    assert flags.items() <= parsed_flags.items()


def write_spec(tmp_path: Path, spec: dict[str, Any]) -> Path:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "config.json").write_text(json.dumps(spec))
    return bundle


def config_env(tmp_path: Path) -> dict[str, str]:
    config = tmp_path / "radium.toml"
    config.write_text(
        f'[hook]\nstate_dir = "{tmp_path}/state"\n[shim]\nlog_file = "{tmp_path}/shim.log"\n'
    )
    return {"RADIUM_CONFIG": str(config)}


def test_start_edits_a_requesting_container(tmp_path: Path, runc_spec: dict[str, Any]) -> None:
    runc_spec["annotations"] = {"radium.io/gpus": "1"}  # ctr/CRI merge the image's env
    bundle = write_spec(tmp_path, runc_spec)
    assert containerd.start(str(bundle), config_env(tmp_path)) is not None
    spec = json.loads((bundle / "config.json").read_text())
    assert spec["annotations"]["radium.io/gpus"] == "1"
    assert spec["hooks"]["prestart"]
    assert "Radium hooks and annotations added" in (tmp_path / "shim.log").read_text()


def test_start_never_touches_a_pod_sandbox(tmp_path: Path, runc_spec: dict[str, Any]) -> None:
    runc_spec["annotations"] = {pods.SANDBOX_ANNOTATION: "sandbox", "radium.io/gpus": "1"}
    bundle = write_spec(tmp_path, runc_spec)
    before = (bundle / "config.json").read_bytes()
    assert containerd.start(str(bundle), config_env(tmp_path)) is None
    assert (bundle / "config.json").read_bytes() == before


def test_delete_cleans_up_only_requesting_containers_and_is_idempotent(
    tmp_path: Path, runc_spec: dict[str, Any]
) -> None:
    env = config_env(tmp_path)
    (tmp_path / "state" / "c1").mkdir(parents=True)
    plain = write_spec(tmp_path, runc_spec)
    assert containerd.delete(str(plain), "c1", env) is None
    assert (tmp_path / "state" / "c1").exists()
    runc_spec["annotations"] = {"radium.io/gpus": "1"}
    (plain / "config.json").write_text(json.dumps(runc_spec))
    for _ in range(2):
        assert containerd.delete(str(plain), "c1", env) is not None
    assert not (tmp_path / "state" / "c1").exists()
    assert containerd.delete(str(tmp_path / "gone"), "../../etc", env) is not None  # refused id
    assert (tmp_path / "state").exists()
