from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path


def hook(stage: str, stdin: bytes, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-I", os.path.join(sysconfig.get_path("scripts"), "radium-hook"), stage],
        input=stdin,
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_container_without_request_is_left_alone(tmp_path: Path) -> None:
    # Even a broken config is never read for a container that asked nothing.
    env = {"RADIUM_CONFIG": str(tmp_path / "absent.toml")}
    state = json.dumps({"id": "c1", "pid": 1, "bundle": str(tmp_path)}).encode()
    result = hook("prestart", state, env)
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")


def test_garbage_state_is_one_line_on_stderr(tmp_path: Path) -> None:
    result = hook("prestart", b"\x00garbage", {})
    assert result.returncode == 1
    assert result.stdout == b""
    assert result.stderr.startswith(b"radium-hook: OCI state on stdin is not valid JSON")
    assert result.stderr.count(b"\n") == 1


def test_unknown_stage(tmp_path: Path) -> None:
    result = hook("poststart", b"{}", {})
    assert result.returncode == 1
    assert b"unknown hook stage 'poststart'" in result.stderr


def test_poststop_is_idempotent(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(f'[hook]\nstate_dir = "{tmp_path}/state"\nlog_file = "{tmp_path}/hook.log"\n')
    (tmp_path / "state" / "c1").mkdir(parents=True)
    (tmp_path / "state" / "c1" / "info.json").write_text("{}")
    state = json.dumps(
        {"id": "c1", "bundle": str(tmp_path), "annotations": {"radium.io/gpus": "1"}}
    ).encode()
    for _ in range(2):
        result = hook("poststop", state, {"RADIUM_CONFIG": str(config)})
        assert (result.returncode, result.stderr) == (0, b"")
    assert list((tmp_path / "state").iterdir()) == []
