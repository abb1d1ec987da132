from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from radium.errors import RuntimeNotFoundError
from radium.shim import passthrough, runtime
from radium.shim.argv import RuncArgs


def write_bundle(tmp_path: Path, spec: dict[str, Any]) -> Path:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "config.json").write_text(json.dumps(spec, indent="\t"))
    (bundle / "config.json").chmod(0o600)
    return bundle


def test_untouched_bundle_is_byte_identical(tmp_path: Path, runc_spec: dict[str, Any]) -> None:
    bundle = write_bundle(tmp_path, runc_spec)
    before = (bundle / "config.json").read_bytes()
    env = {"PATH": os.environ["PATH"], "RADIUM_CONFIG": str(tmp_path / "absent.toml")}
    assert runtime.prepare(str(bundle), "/x/radium-runtime", env) == shutil.which("runc")
    assert (bundle / "config.json").read_bytes() == before


def test_edit_keeps_mode_and_unknown_fields(tmp_path: Path, runc_spec: dict[str, Any]) -> None:
    runc_spec["annotations"] = {"radium.io/gpus": "1"}
    bundle = write_bundle(tmp_path, runc_spec)
    config = tmp_path / "c.toml"
    config.write_text(f'[runtime]\nlog_file = "{tmp_path}/rt.log"\n')
    env = {"PATH": os.environ["PATH"], "RADIUM_CONFIG": str(config)}
    runtime.prepare(str(bundle), "/x/radium-runtime", env)
    edited = json.loads((bundle / "config.json").read_text())
    assert edited["x-future-field"] == {"kept": True}
    assert edited["hooks"]["prestart"]
    assert edited["annotations"] == {"radium.io/gpus": "1"}
    assert (bundle / "config.json").stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in bundle.iterdir()) == ["config.json"]
    assert "Radium hooks and annotations added" in (tmp_path / "rt.log").read_text()


def test_find_runtime_skips_missing_and_itself(tmp_path: Path) -> None:
    me = tmp_path / "runc"
    me.write_text("#!/bin/sh\n")
    me.chmod(0o755)
    other = tmp_path / "bin" / "crun"
    other.parent.mkdir()
    other.write_text("#!/bin/sh\n")
    other.chmod(0o755)
    runtimes = ("/nonexistent/runc", "runc", "crun")
    env = {"PATH": f"{tmp_path}:{other.parent}"}
    assert runtime.find_runtime(runtimes, env, str(me)) == str(other)
    with pytest.raises(RuntimeNotFoundError, match="none of the OCI runtimes"):
        runtime.find_runtime(runtimes, {"PATH": str(tmp_path)}, str(me))


def test_pass_through_reads_only_the_runtime_list(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    cache = str(tmp_path / "cache")
    env = {"RADIUM_CONFIG": str(config)}
    config.write_text('[runtime]\nruntimes = ["crun", "runc"]\n')
    assert passthrough.configured_runtimes(env, cache) == ("crun", "runc")
    assert passthrough.configured_runtimes(env, cache) == ("crun", "runc")  # from the cache
    for broken in ("[runtime\n", "runtime = 3\n", "[runtime]\nruntimes = []\n"):
        config.write_text(broken)  # another size: the cache entry no longer matches
        assert passthrough.configured_runtimes(env, cache) == ("runc", "crun")
    assert passthrough.configured_runtimes({"RADIUM_CONFIG": str(tmp_path / "none")}, cache) == (
        "runc",
        "crun",
    )


def test_pass_through_cache_follows_config_changes_and_survives_garbage(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    cache = tmp_path / "cache"
    env = {"RADIUM_CONFIG": str(config)}
    config.write_text('[runtime]\nruntimes = ["runc"]\n')
    assert passthrough.configured_runtimes(env, str(cache)) == ("runc",)
    config.write_text('[runtime]\nruntimes = ["crun"]\n')  # same size, new mtime/inode
    os.utime(config, ns=(1, 1))
    assert passthrough.configured_runtimes(env, str(cache)) == ("crun",)
    for entry in cache.iterdir():
        entry.write_bytes(b"\x00garbage")
    assert passthrough.configured_runtimes(env, str(cache)) == ("crun",)


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
    config = tmp_path / "broken.toml"
    config.write_text("[runtime\n")
    for args in (["--version"], ["features"]):
        via_wrapper = wrapper(args, {"PATH": os.environ["PATH"], "RADIUM_CONFIG": str(config)})
        direct = subprocess.run([runc, *args], capture_output=True, text=True, check=True)
        # A broken config must not strand running containers: pass-through still works.
        assert via_wrapper.stdout == direct.stdout
        assert via_wrapper.returncode == 0


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


def test_the_python_wrapper_never_execs_its_own_front(tmp_path: Path) -> None:
    """A runtime list naming radium-runtime (the shell front) would exec us in a loop."""
    for name in ("radium-runtime", "radium-runtime-full"):
        (tmp_path / name).write_text("#!/bin/sh\n")
        (tmp_path / name).chmod(0o755)
    full = str(tmp_path / "radium-runtime-full")
    env = {"PATH": str(tmp_path)}
    assert passthrough.find_runtime(["radium-runtime", "radium-runtime-full"], env, full) is None
    assert passthrough.find_runtime(["radium-runtime", "runc"], env, full) is None
