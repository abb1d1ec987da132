"""Install/remove semantics shared by every engine writer: backups, idempotence, restore."""

from __future__ import annotations

from pathlib import Path

from radium.engines import apply, docker
from radium.engines.base import Options

ORIGINAL = b'{"log-driver": "journald",   "registry-mirrors": ["https://m.example"]}\n'


def test_install_twice_is_a_no_op_and_remove_restores_bytes(
    tmp_path: Path, options: Options
) -> None:
    config = tmp_path / "daemon.json"
    config.write_bytes(ORIGINAL)
    plan = docker.plan(options, config)
    assert [o.action for o in apply.install(plan)] == ["written"]
    assert (tmp_path / "daemon.json.radium-backup").read_bytes() == ORIGINAL
    written = config.read_bytes()
    assert [o.action for o in apply.install(plan)] == ["unchanged"]
    assert config.read_bytes() == written
    assert [o.action for o in apply.remove(plan)] == ["restored"]
    assert config.read_bytes() == ORIGINAL  # byte for byte, odd spacing included
    assert sorted(p.name for p in tmp_path.iterdir()) == ["daemon.json"]


def test_remove_after_someone_else_edited_keeps_their_edit(
    tmp_path: Path, options: Options
) -> None:
    config = tmp_path / "daemon.json"
    config.write_bytes(ORIGINAL)
    plan = docker.plan(options, config)
    apply.install(plan)
    config.write_text(config.read_text().replace('"journald"', '"local"'))
    assert [o.action for o in apply.remove(plan)] == ["written"]
    text = config.read_text()
    assert '"local"' in text and "radium" not in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["daemon.json"]


def test_file_that_did_not_exist_is_deleted_again(tmp_path: Path, options: Options) -> None:
    config = tmp_path / "etc" / "daemon.json"
    plan = docker.plan(options, config)
    apply.install(plan)
    assert (tmp_path / "etc" / "daemon.json.radium-absent").exists()
    assert [o.action for o in apply.remove(plan)] == ["restored"]
    assert list((tmp_path / "etc").iterdir()) == []


def test_dry_run_changes_nothing(tmp_path: Path, options: Options) -> None:
    config = tmp_path / "daemon.json"
    config.write_bytes(ORIGINAL)
    (outcome,) = apply.install(docker.plan(options, config), dry_run=True)
    assert outcome.action == "written"
    assert outcome.content is not None and b"radium-runtime" in outcome.content
    assert config.read_bytes() == ORIGINAL
    assert sorted(p.name for p in tmp_path.iterdir()) == ["daemon.json"]


def test_mode_is_kept(tmp_path: Path, options: Options) -> None:
    config = tmp_path / "daemon.json"
    config.write_bytes(ORIGINAL)
    config.chmod(0o600)
    apply.install(docker.plan(options, config))
    assert config.stat().st_mode & 0o777 == 0o600
