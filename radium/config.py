"""The Radium configuration: one frozen, typed tree with complete defaults, loaded strictly.

The file is TOML (``/etc/radium/config.toml``, or the path in ``RADIUM_CONFIG``; for the
``radium`` command line, the config of the user's default ``radium up`` when neither is there).
Every key is optional; an unknown key or a value of the wrong type is an error that names the key.
The tree itself, its sections and their bounds, is :mod:`radium.configtree` (and the sections of
a container's start, :mod:`radium.configstart`): a caller imports its classes from there.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import os
import typing
from typing import Annotated, Any, Literal, Mapping, TypeVar

from radium import tomlcache
from radium.bounds import field_types
from radium.configtree import Config
from radium.constants import CONFIG_PATH, CONFIG_VARIABLE
from radium.errors import ConfigError

__all__ = ["DEFAULT_PATH", "ENV_VAR", "config_path", "find_up_config", "from_dict", "load"]

DEFAULT_PATH = CONFIG_PATH
ENV_VAR = CONFIG_VARIABLE
T = TypeVar("T")


def _build(cls: type[T], data: Mapping[str, Any], prefix: str) -> T:
    hints = field_types(cls)
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    values: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if key not in known:
            raise ConfigError(
                f"unknown config key {dotted!r}", hint="remove it or fix its spelling"
            )
        values[key] = _convert(hints[key], value, dotted)
    return cls(**values)


def _convert(hint: Any, value: Any, dotted: str) -> Any:
    if typing.get_origin(hint) is Annotated:
        hint = typing.get_args(hint)[0]
    if typing.get_origin(hint) is Literal:
        hint = type(typing.get_args(hint)[0])  # which one: _checked, naming every choice
    if dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            raise ConfigError(f"config key {dotted!r} must be a table")
        return _build(hint, value, f"{dotted}.")  # type: ignore[arg-type]
    if typing.get_origin(hint) in (Mapping, collections.abc.Mapping):
        if not isinstance(value, dict):
            raise ConfigError(f"config key {dotted!r} must be a table")
        item = typing.get_args(hint)[1]
        return {str(k): _convert(item, v, f"{dotted}.{k}") for k, v in value.items()}
    if typing.get_origin(hint) is tuple:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"config key {dotted!r} must be a list of strings")
        return tuple(value)
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, hint) or (hint is int and isinstance(value, bool)):
        raise ConfigError(f"config key {dotted!r} must be of type {hint.__name__}")
    return value


def from_dict(data: Mapping[str, Any]) -> Config:
    """Build a Config from parsed TOML, strictly."""
    return _build(Config, data, "")


#: Whether this process also looks for the config of the user's default ``radium up``
#: (:func:`find_up_config`): the ``radium`` command line does; the container start path
#: (hook, runtime, shim: the engine names their config, or /etc's) never does.
_FIND_UP_CONFIG = {"on": False}


def find_up_config() -> None:
    """From now on, without ``RADIUM_CONFIG`` or :data:`DEFAULT_PATH`, read the config of this
    user's default ``radium up`` when it has one (``radium up --detach`` and then ``radium
    gpus`` need no ``export``)."""
    _FIND_UP_CONFIG["on"] = True


def config_path(environ: Mapping[str, str] = os.environ) -> tuple[str, bool]:
    """The file to read and whether it must exist: ``RADIUM_CONFIG``; else
    :data:`DEFAULT_PATH`; else, when :func:`find_up_config` was called and the default
    ``radium up`` state directory has a config (and is safe: radium.statedir), that one."""
    explicit = environ.get(ENV_VAR, "")
    if explicit:
        return explicit, True
    if _FIND_UP_CONFIG["on"] and not os.path.exists(DEFAULT_PATH):
        from radium.statedir import up_config  # not on the container start path

        found = up_config(environ)
        if found is not None:
            return str(found), True
    return DEFAULT_PATH, False


def load(
    path: str | os.PathLike[str] | None = None, environ: Mapping[str, str] = os.environ
) -> Config:
    """Load the configuration; a missing default file means all defaults."""
    if path is None:
        path, explicit = config_path(environ)
    else:
        path, explicit = os.fspath(path), True
    try:
        data = tomlcache.load_file(path, f"config file {path}")
    except FileNotFoundError as exc:
        if not explicit:
            return Config()
        raise ConfigError(
            f"config file {path} does not exist", hint=f"create it or unset {ENV_VAR}"
        ) from exc
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    try:
        return from_dict(data)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc.message}", hint=exc.hint) from exc
