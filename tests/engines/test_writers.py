"""Golden files for every engine's configuration writer."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from radium.engines import apply, containerd, crio, docker, podman
from radium.engines.base import Options
from radium.errors import ConfigError
from tests.engines.conftest import GOLDEN, check_golden

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@pytest.mark.parametrize("default", [False, True])
def test_docker_daemon_json(tmp_path: Path, options: Options, default: bool) -> None:
    config = tmp_path / "daemon.json"
    config.write_bytes((GOLDEN / "docker-daemon.in.json").read_bytes())
    opts = Options(programs=options.programs, set_as_default=default)
    apply.install(docker.plan(opts, config))
    check_golden(f"docker-daemon{'-default' if default else ''}.out.json", config.read_bytes())
    data = json.loads(config.read_text())
    assert data["runtimes"]["nvidia"] == {"path": "nvidia-container-runtime"}  # kept


def test_docker_bad_json_changes_nothing(tmp_path: Path, options: Options) -> None:
    config = tmp_path / "daemon.json"
    config.write_text("{oops")
    with pytest.raises(ConfigError, match="is not valid JSON"):
        apply.install(docker.plan(options, config))
    assert config.read_text() == "{oops"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["daemon.json"]


@pytest.mark.parametrize("default", [False, True])
def test_containerd_dropin_and_imports(tmp_path: Path, options: Options, default: bool) -> None:
    config, dropin = tmp_path / "config.toml", tmp_path / "conf.d" / "radium.toml"
    original = (GOLDEN / "containerd-config.in.toml").read_bytes()
    config.write_bytes(original)
    opts = Options(programs=options.programs, set_as_default=default)
    plan = containerd.plan(opts, config, dropin)
    apply.install(plan)
    suffix = "-default" if default else ""
    check_golden(
        f"containerd-dropin{suffix}.out.toml",
        dropin.read_bytes().replace(str(tmp_path).encode(), b"TMP"),
    )
    check_golden(
        "containerd-config.out.toml", config.read_bytes().replace(str(tmp_path).encode(), b"TMP")
    )
    runtime = tomllib.loads(dropin.read_text())["plugins"][containerd.CRI]["containerd"][
        "runtimes"
    ]["radium"]
    # runc's options copied, with the wrapper as the runc binary; no runtime_path (containerd
    # 1.6 ignores it)
    assert runtime["options"] == {
        "SystemdCgroup": True,
        "BinaryName": "/opt/radium/bin/radium-runtime",
    }
    assert "runtime_path" not in runtime
    assert [o.action for o in apply.install(plan)] == ["unchanged", "unchanged"]
    assert [o.action for o in apply.remove(plan)] == ["deleted", "restored"]
    assert config.read_bytes() == original


def test_containerd_without_main_config(tmp_path: Path, options: Options) -> None:
    config, dropin = tmp_path / "config.toml", tmp_path / "radium.toml"
    apply.install(containerd.plan(options, config, dropin))
    assert tomllib.loads(config.read_text()) == {"version": 2, "imports": [str(dropin)]}


def test_containerd_version_1_is_refused(tmp_path: Path, options: Options) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[plugins.cri]\nsandbox_image = "x"\n')
    with pytest.raises(ConfigError, match="not a version 2 containerd config"):
        containerd.plan(options, config, tmp_path / "d.toml")


@pytest.mark.parametrize("default", [False, True])
def test_crio_dropin(tmp_path: Path, options: Options, default: bool) -> None:
    dropin = tmp_path / "99-radium.conf"
    apply.install(crio.plan(Options(programs=options.programs, set_as_default=default), dropin))
    check_golden(f"crio-dropin{'-default' if default else ''}.out.conf", dropin.read_bytes())
    handler = tomllib.loads(dropin.read_text())["crio"]["runtime"]["runtimes"]["radium"]
    assert handler["runtime_path"] == options.programs["radium-runtime"]
    assert [o.action for o in apply.remove(crio.plan(options, dropin))] == ["deleted"]
    assert not dropin.exists()


def test_podman_hooks_files(tmp_path: Path, options: Options) -> None:
    plan = podman.plan(options, tmp_path)
    apply.install(plan)
    for stage in podman.STAGES:
        check_golden(
            f"podman-radium-{stage}.out.json", (tmp_path / f"radium-{stage}.json").read_bytes()
        )
    assert [o.action for o in apply.install(plan)] == ["unchanged", "unchanged"]
    assert [o.action for o in apply.remove(plan)] == ["deleted", "deleted"]
    assert list(tmp_path.iterdir()) == []


def test_packaged_hooks_files_match_the_writer() -> None:
    """packaging/hooks.d holds the files for a system-wide install (Debian package paths)."""
    packaged = Path(__file__).parents[2] / "packaging" / "hooks.d"
    system = Options(
        programs={"python": "/usr/bin/python3", "radium-hook": "/usr/bin/radium-hook"},
    )
    for stage in podman.STAGES:
        assert (packaged / f"radium-{stage}.json").read_bytes() == podman.hook_file(system, stage)


def test_containerd_dropin_follows_the_main_cri_section(tmp_path: Path, options: Options) -> None:
    """The drop-in repeats the main config's CRI section (an import replaces it whole): an
    edit there after setup shows as a stale drop-in (``radium doctor`` fails, naming setup)."""
    config, dropin = tmp_path / "config.toml", tmp_path / "conf.d" / "radium.toml"
    config.write_bytes((GOLDEN / "containerd-config.in.toml").read_bytes())
    apply.install(containerd.plan(options, config, dropin))
    written = tomllib.loads(dropin.read_text())["plugins"][containerd.CRI]
    assert written["sandbox_image"] == "registry.k8s.io/pause:3.9"
    assert written["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"] is True
    config.write_text(config.read_text().replace("pause:3.9", "pause:3.10"))
    outcomes = apply.install(containerd.plan(options, config, dropin), dry_run=True)
    assert (outcomes[0].path, outcomes[0].action != "unchanged") == (dropin, True)
