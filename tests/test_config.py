from __future__ import annotations

import dataclasses
import re
import typing
from pathlib import Path

import pytest

from radium import config
from radium.bounds import field_types
from radium.configstart import HookConfig
from radium.configtree import QueueConfig
from radium.errors import ConfigError


def test_missing_default_file_means_defaults(tmp_path: Path) -> None:
    loaded = config.load(environ={}) if not Path(config.DEFAULT_PATH).exists() else None
    assert loaded is None or loaded == config.Config()
    assert config.Config().runtime.runtimes == ("runc", "crun")


def test_full_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        '[bundles]\ndir = "/b"\n[hook]\nno_python = "fail"\n'
        '[runtime]\nruntimes = ["crun"]\nhook_command = ["/x/radium-hook"]\n'
    )
    loaded = config.load(environ={"RADIUM_CONFIG": str(path)})
    assert loaded.bundles.dir == "/b"
    assert loaded.hook.no_python == "fail"
    assert loaded.hook.state_dir == HookConfig().state_dir
    assert loaded.runtime.runtimes == ("crun",)
    assert loaded.runtime.hook_command == ("/x/radium-hook",)


def test_queues_are_tables_by_name(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[pool.queues.research]\ndeserved = 2\n[pool.queues.web]\nlimit = 1.5\n")
    queues = config.load(path).pool.queues
    assert queues == {
        "research": QueueConfig(deserved=2.0),
        "web": QueueConfig(limit=1.5),
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[hook]\nlogfile = 'x'\n", "unknown config key 'hook.logfile'"),
        ("[nope]\n", "unknown config key 'nope'"),
        ("hook = 3\n", "'hook' must be a table"),
        ("[runtime]\nruntimes = 'runc'\n", "'runtime.runtimes' must be a list of strings"),
        ("[runtime]\nruntimes = []\n", "runtime.runtimes must name at least one runtime"),
        ("[hook]\nno_python = 'maybe'\n", "hook.no_python must be"),
        ("[hook]\nstate_dir = 'relative'\n", "hook.state_dir must be an absolute path"),
        ("[bundles]\ndir = 7\n", "'bundles.dir' must be of type str"),
        ("[hook\n", "is not valid TOML"),
        ("[pool]\nqueues = 3\n", "'pool.queues' must be a table"),
        ("[pool.queues.a]\ndeserve = 1\n", "unknown config key 'pool.queues.a.deserve'"),
        ("[pool.queues.a]\nlimit = 'x'\n", "'pool.queues.a.limit' must be of type float"),
        ("[pool]\nlease_listen = '7401'\n", "pool.lease_listen must be host:port"),
        ("[pool]\nlease_listen = 'a:1,b:2'\n", "pool.lease_listen is one host:port"),
        ("[client]\nleases = 'a:1,b'\n", "client.leases must be host:port (or a comma"),
        ("[client]\nleases = 'a:99999'\n", "client.leases must be host:port"),
    ],
)
def test_bad_files_name_the_problem(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        config.load(path)
    assert message in info.value.one_line()
    assert str(path) in info.value.one_line()


def test_explicit_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        config.load(environ={"RADIUM_CONFIG": str(tmp_path / "absent.toml")})


def test_binary_garbage_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ConfigError, match="not UTF-8"):
        config.load(path)


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('[pool]\nstore = "zookeeper"\n', 'pool.store must be "sqlite" or "etcd"'),
        ('[pool.etcd]\nprefix = "radium"\n', "pool.etcd.prefix must start and end with '/'"),
        ('[pool.etcd]\ncert = "/c.pem"\n', "cert and key together"),
        ("[pool.etcd]\nelection_ttl = 0\n", "pool.etcd.election_ttl must be positive"),
        ('[pool.etcd]\nendpoints = "http://e:2379"\n', "must be a list of strings"),
        ("[pool]\nended_kept = 0\n", "pool.ended_kept must be positive"),
        ("[pool]\nended_retention = -1.0\n", "pool.ended_retention must be positive"),
        ('[pool]\nended_kept = "all"\n', "pool.ended_kept"),
    ],
)
def test_bad_store_settings_are_refused(tmp_path: Path, toml: str, message: str) -> None:
    path = tmp_path / "radium.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError, match=re.escape(message)):
        config.load(path)


def test_ended_lease_settings_are_read(tmp_path: Path) -> None:
    path = tmp_path / "radium.toml"
    path.write_text("[pool]\nended_kept = 500\nended_retention = 3600.0\n")
    loaded = config.load(path).pool
    assert (loaded.ended_kept, loaded.ended_retention) == (500, 3600.0)


def _bounded(cls: type, prefix: str = "") -> list[tuple[str, object]]:
    """Every field of the tree with a declared bound, and a value that breaks it."""
    found: list[tuple[str, object]] = []
    for name, hint in field_types(cls).items():
        key = f"{prefix}{name}"
        if typing.get_origin(hint) is typing.Annotated:
            found.append((key, "relative" if typing.get_args(hint)[0] is str else 0))
        elif typing.get_origin(hint) is typing.Literal:
            found.append((key, "no-such-choice"))
        elif dataclasses.is_dataclass(hint):
            found += _bounded(hint, f"{key}.")  # type: ignore[arg-type]
    return found


def test_every_declared_bound_is_kept_and_named() -> None:
    """Each bound declared on a field (radium/bounds.py) refuses a value that breaks it, in one
    line naming its key; the walk finds the bounds the issue's checks used to spell out."""
    bounded = _bounded(config.Config)
    keys = {key for key, _ in bounded}
    assert {"hook.no_python", "pool.etcd.election_ttl", "acceptor.sandbox.uid_lock_dir"} <= keys
    assert len(bounded) == 28
    for key, bad in bounded:
        *path, last = key.split(".")
        data: dict[str, object] = {last: bad}
        for part in reversed(path):
            data = {part: data}
        with pytest.raises(ConfigError, match=f"^config key {re.escape(key)} must .*got "):
            config.from_dict(data)
