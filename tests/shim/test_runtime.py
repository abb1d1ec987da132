from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from radium.shim import runtime
from radium.shim.argv import RuncArgs

from radium.config import Config, RuntimeConfig
from radium.errors import RuntimeNotFoundError


def write_bundle(tmp_path: Path, spec: dict[str, Any]) -> Path:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "config.json").write_text(json.dumps(spec, indent="\t"))
    (bundle / "config.json").chmod(0o600)
    return bundle


def test_untouched_bundle_is_byte_identical(tmp_path: Path, runc_spec: dict[str, Any]) -> None:
    bundle = write_bundle(tmp_path, runc_spec)
    before = (bundle / "config.json").read_bytes()
    assert runtime.edit_bundle(bundle, Config(), {}) is False
    assert (bundle / "config.json").read_bytes() == before


def test_edit_keeps_mode_and_unknown_fields(tmp_path: Path, runc_spec: dict[str, Any]) -> None:
    runc_spec["process"]["env"].append("RADIUM_GPUS=1")
    bundle = write_bundle(tmp_path, runc_spec)
    assert runtime.edit_bundle(bundle, Config(), {}) is True
    edited = json.loads((bundle / "config.json").read_text())
    assert edited["x-future-field"] == {"kept": True}
    assert edited["hooks"]["prestart"]
    assert (bundle / "config.json").stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in bundle.iterdir()) == ["config.json"]


def test_find_runtime_skips_missing_and_itself(tmp_path: Path) -> None:
    me = tmp_path / "runc"
    me.write_text("#!/bin/sh\n")
    me.chmod(0o755)
    other = tmp_path / "bin" / "crun"
    other.parent.mkdir()
    other.write_text("#!/bin/sh\n")
    other.chmod(0o755)
    config = Config(runtime=RuntimeConfig(runtimes=("/nonexistent/runc", "runc", "crun")))
    env = {"PATH": f"{tmp_path}:{other.parent}"}
    assert runtime.find_runtime(config, env, str(me)) == str(other)
    with pytest.raises(RuntimeNotFoundError, match="none of the OCI runtimes"):
        runtime.find_runtime(config, {"PATH": str(tmp_path)}, str(me))


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_report_writes_runc_log_line(
    tmp_path: Path, log_format: str, capsys: pytest.CaptureFixture[str]
) -> None:
    log_file = tmp_path / "log.json"
    runtime.report(RuncArgs("create", str(log_file), log_format), 'bad "thing"')
    line = log_file.read_text().strip()
    if log_format == "json":
        record = json.loads(line)
        assert record["level"] == "error"
        assert record["msg"] == 'radium-runtime: bad "thing"'
    else:
        assert 'level=error msg="radium-runtime: bad \\"thing\\""' in line
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == 'radium-runtime: bad "thing"\n'


def wrapper(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from radium.shim.runtime_main import main; sys.exit(main())",
            *args,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_pass_through_to_real_runc(tmp_path: Path) -> None:
    runc = shutil.which("runc")
    assert runc, "runc is not installed: apt-get install runc"
    env = {"PATH": os.environ["PATH"], "RADIUM_CONFIG": str(tmp_path / "absent.toml")}
    via_wrapper = wrapper(["--version"], env)
    direct = subprocess.run([runc, "--version"], capture_output=True, text=True, check=True)
    assert via_wrapper.stdout == direct.stdout
    # A broken config must not strand running containers: pass-through still works.
    assert "does not exist" in via_wrapper.stderr


def test_create_with_broken_spec_fails_in_one_line(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "config.json").write_text("{not json")
    log_file = tmp_path / "log.json"
    env = {"PATH": os.environ["PATH"], "RADIUM_CONFIG": str(tmp_path / "absent.toml")}
    (tmp_path / "absent.toml").write_text(f'[runtime]\nlog_file = "{tmp_path}/rt.log"\n')
    result = wrapper(
        ["--log", str(log_file), "--log-format", "json", "create", "--bundle", str(bundle), "c1"],
        env,
    )
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert "config.json is not valid JSON" in result.stderr
    assert "config.json is not valid JSON" in json.loads(log_file.read_text())["msg"]
    assert "Traceback" not in result.stderr
