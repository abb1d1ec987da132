"""The state directory of ``radium up`` (radium/statedir.py): refused when another local user
could read, replace or redirect it; every file in it opened through its descriptor."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from radium import statedir, up, upconfig
from radium.errors import UnsafeStateDirError
from radium.statedir import open_state_dir


def test_an_absent_directory_is_created_0700_with_its_parents(tmp_path: Path) -> None:
    state = tmp_path / "a" / "b" / "state"
    with open_state_dir(state, create=True) as directory:
        assert directory.path == state
    assert state.stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "a").stat().st_mode & 0o022 == 0


def test_an_absent_directory_is_not_created_for_down(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        open_state_dir(tmp_path / "none", create=False)
    assert not (tmp_path / "none").exists()


def test_an_existing_one_of_ours_is_tightened_to_0700(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    state.chmod(0o755)
    open_state_dir(state, create=True).close()
    assert state.stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o702])
def test_one_writable_by_others_is_refused(tmp_path: Path, mode: int) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(mode)
    with pytest.raises(UnsafeStateDirError) as refused:
        open_state_dir(state, create=True)
    assert refused.value.one_line() == (
        f"state directory {state} is writable by other users (mode {mode:04o}); "
        "remove it or choose another --state-dir"
    )


def test_one_owned_by_someone_else_is_refused(tmp_path: Path) -> None:
    # As a user of another uid sees it (the uid is the check's, so no root is needed here).
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    me, fd = os.geteuid(), os.open(state, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(UnsafeStateDirError) as refused:
            statedir._check_own(fd, statedir._Walk(state, me + 1, "--state-dir"))
    finally:
        os.close(fd)
    assert refused.value.one_line() == (
        f"state directory {state} is owned by uid {me}, not you (uid {me + 1}); "
        "remove it or choose another --state-dir"
    )


def test_the_directory_itself_may_not_be_a_link(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir(mode=0o700)
    (tmp_path / "state").symlink_to(tmp_path / "real")
    with pytest.raises(UnsafeStateDirError) as refused:
        open_state_dir(tmp_path / "state", create=True)
    assert refused.value.one_line() == (
        f"state directory {tmp_path / 'state'} is a symbolic link (to {tmp_path / 'real'}); "
        "remove it or choose another --state-dir"
    )


def test_a_link_of_ours_on_the_way_is_followed_and_checked(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir(mode=0o755)
    (tmp_path / "via").symlink_to("real")
    with open_state_dir(tmp_path / "via" / "state", create=True):
        pass
    assert (tmp_path / "real" / "state").stat().st_mode & 0o777 == 0o700
    (tmp_path / "open").mkdir()
    (tmp_path / "open").chmod(0o777)  # not sticky: anyone could swap what is in it
    (tmp_path / "to-open").symlink_to(tmp_path / "open")
    with pytest.raises(UnsafeStateDirError, match="open is writable by other users"):
        open_state_dir(tmp_path / "to-open" / "state", create=True)


def test_a_parent_writable_by_others_needs_its_sticky_bit(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(UnsafeStateDirError) as refused:
        open_state_dir(shared / "state", create=True)
    assert refused.value.one_line() == (
        f"state directory {shared / 'state'}: {shared} is writable by other users (mode 0777, "
        "not sticky), who could replace what is in it; choose another --state-dir"
    )
    assert not (shared / "state").exists()  # nothing made there
    shared.chmod(0o1777)  # as /tmp
    open_state_dir(shared / "state", create=True).close()


def test_a_file_is_written_over_a_link_never_through_it(tmp_path: Path) -> None:
    target = tmp_path / "attacker-owned"
    target.write_text("mine\n")
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "config.toml").symlink_to(target)
    with open_state_dir(state, create=True) as directory:
        # Read: a link is refused rather than followed.
        with pytest.raises(UnsafeStateDirError) as refused:
            directory.read("config.toml")
        assert refused.value.one_line() == (
            f"{state}/config.toml is a symbolic link; remove it, or choose another "
            f"--state-dir than {state}"
        )
        directory.write("config.toml", b"secret\n")
    assert target.read_text() == "mine\n"
    assert not (state / "config.toml").is_symlink()
    assert (state / "config.toml").read_text() == "secret\n"
    assert (state / "config.toml").stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in state.iterdir()) == ["config.toml"]  # no temporary left


def test_up_writes_its_config_and_pids_over_planted_links(tmp_path: Path) -> None:
    planted = {name: tmp_path / f"planted-{name}" for name in ("config.toml", "pids.json")}
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    for name, target in planted.items():
        target.write_text("")
        (state / name).symlink_to(target)
    with open_state_dir(state, create=True) as directory:
        with pytest.raises(UnsafeStateDirError, match="is a symbolic link"):
            upconfig.prepare(
                directory, "127.0.0.1:7400", 2, check=False
            )  # reading the old tokens: refused
        (state / "config.toml").unlink()
        config = upconfig.prepare(directory, "127.0.0.1:7400", 2, check=False)
        up._write_pids(directory, {"up": 1})
        with pytest.raises(UnsafeStateDirError, match="is a symbolic link"):
            (state / "up.lock").symlink_to(tmp_path / "planted-lock")
            up._claim(directory)
    assert all(target.read_text() == "" for target in planted.values())
    assert not (tmp_path / "planted-lock").exists()
    assert "agent_tokens" in config.read_text()


def test_the_tokens_are_kept_between_runs(tmp_path: Path) -> None:
    with open_state_dir(tmp_path / "state", create=True) as directory:
        first = upconfig.prepare(directory, "127.0.0.1:7400", 2, check=False).read_text()
        second = upconfig.prepare(directory, "127.0.0.1:7400", 2, check=False).read_text()
    assert first == second and "agent_tokens" in first


def test_another_setting_is_named_in_the_hint(tmp_path: Path) -> None:
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent").chmod(0o777)
    with pytest.raises(UnsafeStateDirError) as refused:
        open_state_dir(tmp_path / "agent", create=True, setting="[agent] state_file")
    assert refused.value.hint == "remove it or choose another [agent] state_file"
