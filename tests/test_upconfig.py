"""The config ``radium up`` keeps (radium/upconfig.py): free ports, then the user's file."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from radium import config as config_module
from radium import statedir, tomlcache, upconfig
from radium.errors import ConfigError, UnavailableError, UsageError
from radium.statedir import open_state_dir


def prepare(
    state: Path, listen: str | None = None, cpu_devices: int | None = None, check: bool = False
) -> str:
    with open_state_dir(state, create=True) as directory:
        return upconfig.prepare(directory, listen, cpu_devices, check=check).read_text()


def tokens(text: str) -> tuple[str, ...]:
    return config_module.from_dict(tomlcache.parse(text.encode(), "config")).pool.agent_tokens


def addresses(config: config_module.Config) -> list[str]:
    return [
        config.pool.listen,
        config.pool.lease_listen,
        config.pool.metrics,
        config.acceptor.metrics,
        config.agent.metrics,
    ]


@pytest.fixture
def busy(monkeypatch: pytest.MonkeyPatch) -> set[int]:
    """Ports another program holds, as :func:`upconfig.is_free` sees them (none at first)."""
    held: set[int] = set()
    monkeypatch.setattr(upconfig, "is_free", lambda host, port: port not in held)
    return held


def test_the_first_start_takes_the_well_known_ports_when_free(
    tmp_path: Path, busy: set[int]
) -> None:
    prepare(tmp_path)
    config = config_module.load(tmp_path / "config.toml")
    ports = ["7400", "7401", "7410", "7411", "7412"]
    assert addresses(config) == [f"127.0.0.1:{port}" for port in ports]
    assert config.client.pool == config.acceptor.pool == "127.0.0.1:7400"
    assert config.client.token == config.pool.agent_tokens[0]
    assert config.acceptor.token == config.pool.acceptor_tokens[0]
    assert config.agent.socket == str(tmp_path / "agent.sock")
    assert config.agent.state_file == str(tmp_path / "agent-state.json")


def test_ports_in_use_are_replaced_by_free_ones_below_the_ephemeral_range(
    tmp_path: Path, busy: set[int]
) -> None:
    busy.update({7400, 7410, 7411, 7412})
    prepare(tmp_path)
    config = config_module.load(tmp_path / "config.toml")
    ports = [int(address.rpartition(":")[2]) for address in addresses(config)]
    assert len(set(ports)) == 5 and not set(ports) & busy
    assert ports[1] == ports[0] + 1  # the lease socket takes the pool's next port
    assert all(upconfig.LOWEST_PORT <= port < upconfig._ephemeral_start() for port in ports)


def test_a_later_start_keeps_the_users_edits_and_adds_only_what_is_missing(
    tmp_path: Path, busy: set[int]
) -> None:
    first = prepare(tmp_path)
    edited = (
        first.replace("cpu_devices = 2", "cpu_devices = 5  # mine")
        .replace('metrics = "127.0.0.1:7412"\n', "")  # removed: added again
        .replace("[agent]", "# my comment\n[acceptor.sandbox]\nuid_min = 250000\n\n[agent]")
    )
    (tmp_path / "config.toml").write_text(edited)
    busy.add(7412)  # another program took it meanwhile
    second = prepare(tmp_path)
    assert second.startswith(edited.rstrip("\n"))  # every line kept, in place
    config = config_module.load(tmp_path / "config.toml")
    assert (config.acceptor.cpu_devices, config.acceptor.sandbox.uid_min) == (5, 250000)
    assert config.agent.metrics not in ("", "127.0.0.1:7412")
    assert config.pool.agent_tokens == tokens(first)


def test_an_unchanged_config_is_not_written_again(tmp_path: Path, busy: set[int]) -> None:
    prepare(tmp_path)
    before = (tmp_path / "config.toml").stat()
    busy.update({7400, 7410})  # what it has is kept, free or not (check_free says so)
    prepare(tmp_path)
    after = (tmp_path / "config.toml").stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_the_command_line_sets_its_keys_and_keeps_the_tokens(
    tmp_path: Path, busy: set[int]
) -> None:
    first = config_module.from_dict(tomlcache.parse(prepare(tmp_path).encode(), "first"))
    prepare(tmp_path, listen="127.0.0.1:9000", cpu_devices=3)
    config = config_module.load(tmp_path / "config.toml")
    assert (config.pool.listen, config.pool.lease_listen) == ("127.0.0.1:9000", "127.0.0.1:9001")
    assert (config.client.pool, config.client.leases) == ("127.0.0.1:9000", "127.0.0.1:9001")
    assert (config.acceptor.pool, config.acceptor.cpu_devices) == ("127.0.0.1:9000", 3)
    assert config.pool.agent_tokens == first.pool.agent_tokens
    assert config.client.token == first.client.token
    assert config.acceptor.token == first.acceptor.token


def test_a_bad_listen_and_a_bad_key_are_one_line_each_and_nothing_is_written(
    tmp_path: Path, busy: set[int]
) -> None:
    with pytest.raises(UsageError) as bad:
        prepare(tmp_path, listen="nowhere")
    assert bad.value.one_line() == "--listen must be host:port, got 'nowhere'"
    text = prepare(tmp_path) + "[agent.extra]\n"
    (tmp_path / "config.toml").write_text(text)
    with pytest.raises(ConfigError) as typo:
        prepare(tmp_path)
    assert typo.value.one_line() == (
        f"{tmp_path / 'config.toml'}: unknown config key 'agent.extra'; "
        "remove it or fix its spelling"
    )
    assert (tmp_path / "config.toml").read_text() == text


def test_an_address_in_use_names_its_key_and_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(upconfig, "is_free", lambda host, port: True)
    prepare(tmp_path)
    monkeypatch.undo()  # the real check from here on
    path = tmp_path / "config.toml"
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = f"127.0.0.1:{holder.getsockname()[1]}"
        path.write_text(path.read_text().replace("127.0.0.1:7411", taken))
        with pytest.raises(UnavailableError) as in_use:
            upconfig.check_free(config_module.load(path), path)
    assert in_use.value.one_line() == (
        f"{taken} (acceptor.metrics in {path}) is in use: another radium up, or another "
        f"program, listens there; stop it, or set acceptor.metrics in {path} to a free address "
        '(or "" for none)'
    )


def test_a_listen_in_use_writes_nothing(tmp_path: Path, busy: set[int]) -> None:
    text = prepare(tmp_path)
    busy.add(9000)
    with pytest.raises(UnavailableError) as in_use:
        prepare(tmp_path, listen="127.0.0.1:9000", check=True)
    assert in_use.value.hint == (
        "stop it, or give radium up another --listen (its lease socket takes the next port)"
    )
    assert (tmp_path / "config.toml").read_text() == text


def test_an_address_of_another_machine_is_named_too(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[pool]\nlisten = "192.0.2.1:7400"\nmetrics = ""\n')
    with pytest.raises(UnavailableError) as foreign:
        upconfig.check_free(config_module.load(path), path)
    assert foreign.value.one_line().startswith(
        f"cannot listen on 192.0.2.1:7400 (pool.listen in {path}): "
    )


@pytest.fixture
def default_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The default ``radium up`` state directory moved under ``tmp_path``, no /etc config,
    and the command line's search for the former on (as radium.cli turns it on)."""
    state = tmp_path / "up"
    monkeypatch.setattr(statedir, "default_up_dir", lambda environ=None: state)
    monkeypatch.setattr(config_module, "DEFAULT_PATH", str(tmp_path / "etc-config.toml"))
    monkeypatch.setitem(config_module._FIND_UP_CONFIG, "on", True)
    return state


def test_the_command_line_finds_the_default_radium_ups_config(
    default_up: Path, busy: set[int]
) -> None:
    assert config_module.config_path({}) == (config_module.DEFAULT_PATH, False)  # none yet
    prepare(default_up)
    found = str(default_up / "config.toml")
    assert config_module.config_path({}) == (found, True)
    assert config_module.load(environ={}).client.token  # what `radium gpus` then sends
    assert config_module.config_path({"RADIUM_CONFIG": "/x.toml"}) == ("/x.toml", True)
    Path(config_module.DEFAULT_PATH).write_text("")
    assert config_module.config_path({}) == (config_module.DEFAULT_PATH, False)


def test_the_container_start_path_never_looks_for_it(
    default_up: Path, busy: set[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    prepare(default_up)
    monkeypatch.setitem(config_module._FIND_UP_CONFIG, "on", False)
    assert config_module.config_path({}) == (config_module.DEFAULT_PATH, False)


def plant(state: Path, how: str, elsewhere: Path) -> None:
    """What another local user could have made of the default state directory."""
    if how == "writable by others":
        state.chmod(0o777)
    elif how == "owned by another user":
        os.chown(state, 54321, 54321)
    else:  # its config a link to a file elsewhere
        (state / "config.toml").rename(elsewhere)
        (state / "config.toml").symlink_to(elsewhere)


@pytest.mark.parametrize("how", ["writable by others", "owned by another user", "linked"])
@pytest.mark.parametrize("search", ["checked", "by path alone"])
def test_an_unsafe_default_state_dir_or_a_linked_config_is_not_read(
    default_up: Path,
    busy: set[int],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    how: str,
    search: str,
) -> None:
    prepare(default_up)
    plant(default_up, how, tmp_path / "elsewhere.toml")
    found = (str(default_up / "config.toml"), True)
    if search == "by path alone":  # the hole the check closes: the planted config is read
        monkeypatch.setattr(statedir, "up_config", lambda environ: default_up / "config.toml")
        assert config_module.config_path({}) == found
        return
    assert config_module.config_path({}) == (config_module.DEFAULT_PATH, False)


def test_the_default_state_dir_is_roots_or_the_users_xdg_state_dir(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert statedir.default_up_dir({"HOME": "/root"}) == Path("/var/lib/radium/up")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert statedir.default_up_dir({"HOME": "/home/u"}) == Path("/home/u/.local/state/radium/up")
    assert statedir.default_up_dir({"HOME": "/h", "XDG_STATE_HOME": "/s"}) == Path("/s/radium/up")
