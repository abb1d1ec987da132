"""The config ``radium up`` keeps in its state directory: written once, then the user's.

At its first start ``radium up`` writes every key it needs: fresh tokens, paths in the state
directory (database, acceptor slots, the agent's socket, state and log), and its ports: the
well-known ones (pool 7400 and its lease socket 7401, metrics 7410-7412) when they are free,
else free ones, so a second ``radium up`` on the machine (another state directory, or
``scripts/demo`` beside the Quickstart) takes others by itself. The ports it picked are in the
file, so they stay the same at every later start, as do the tokens.

At a later start the file is the user's: it is read, only keys that are missing are added
(an edit, a comment, a key of the user's own are kept), and it is written again only when
something was added or ``--listen``/``--cpu-devices`` were given (the command line sets
theirs). Before any service starts, each address the config names is checked: one in use
fails with the key and the file to edit, not with a service's exit status.

Every read and write goes through the state directory's descriptor (radium.statedir).
"""

from __future__ import annotations

import errno
import functools
import random
import secrets
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tomlkit
import tomlkit.items

from radium import addresses, tomlcache
from radium import config as config_module
from radium.configtree import Config
from radium.errors import ConfigError, UnavailableError, UsageError
from radium.statedir import StateDir

__all__ = [
    "CONFIG",
    "HEADER",
    "HOST",
    "LISTENED",
    "LOWEST_PORT",
    "METRICS_PORTS",
    "POOL_PORT",
    "check_free",
    "is_free",
    "prepare",
]

CONFIG = "config.toml"
HOST = "127.0.0.1"
#: The pool's well-known port (its lease socket takes the next one).
POOL_PORT = 7400
#: Where each service serves Prometheus metrics when the port is free (docs/metrics.md).
METRICS_PORTS = {"pool": 7410, "acceptor": 7411, "agent": 7412}
#: Free ports are picked from here up to the kernel's ephemeral range, which they stay below:
#: a port from it may go to any outgoing connection while this pool is down.
LOWEST_PORT = 10_000
HEADER = (
    "# Written by `radium up` at its first start, then yours: a later `radium up` keeps what\n"
    "# is here and adds only what is missing (--listen and --cpu-devices, given, set theirs).\n"
)
#: (table, key) of each address the services listen on; a port of 0 or "" is never checked.
LISTENED = (
    ("pool", "listen"),
    ("pool", "lease_listen"),
    ("pool", "metrics"),
    ("acceptor", "metrics"),
    ("agent", "metrics"),
)


def prepare(
    directory: StateDir, listen: str | None, cpu_devices: int | None, check: bool = True
) -> Path:
    """The config of the ``radium up`` in ``directory``, completed (and written when it
    changed); ``listen``/``cpu_devices``: what the command line set (None: not given). With
    ``check``, an address in it that is in use fails first (:func:`check_free`), and nothing
    is written."""
    if listen is not None and addresses.split_host_port(listen) is None:
        raise UsageError(f"--listen must be host:port, got {listen!r}")
    if cpu_devices is not None and cpu_devices < 1:
        raise UsageError(f"--cpu-devices must be 1 or more, got {cpu_devices}")
    path = directory.path / CONFIG
    raw = directory.read(CONFIG)
    source = f"config file {path}"
    if raw is None:
        document = tomlkit.parse(HEADER)
    else:
        _validate(tomlcache.parse(raw, source), path)  # the user's mistakes, named first
        document = tomlkit.parse(raw.decode())
    _complete(document, directory.path, listen, cpu_devices)
    text = tomlkit.dumps(document)
    config = _validate(tomlcache.parse(text.encode(), source), path)
    if check:
        check_free(config, path)
    if raw is None or text.encode() != raw:
        directory.write(CONFIG, text.encode())
    return path


def _validate(data: dict[str, Any], path: Path) -> Config:
    try:
        return config_module.from_dict(data)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc.message}", hint=exc.hint) from exc


def _table(document: tomlkit.TOMLDocument, name: str) -> Any:
    if name not in document:
        document.add(name, tomlkit.table())
    return document[name]


def _complete(
    document: tomlkit.TOMLDocument, state: Path, listen: str | None, cpu_devices: int | None
) -> None:
    """Add what is missing; set what the command line gave."""
    pool, client = _table(document, "pool"), _table(document, "client")
    acceptor, agent = _table(document, "acceptor"), _table(document, "agent")
    if listen is not None:
        leases = _next_port(listen)
        pool["listen"], pool["lease_listen"] = listen, leases
        client["pool"], client["leases"], acceptor["pool"] = listen, leases, listen
    if cpu_devices is not None:
        acceptor["cpu_devices"] = cpu_devices
    if "listen" not in pool:
        pool["listen"] = _pool_address(_taken(document))
    pool.setdefault("lease_listen", _next_port(str(pool["listen"])))
    pool.setdefault("db", str(state / "pool.db"))
    # An empty list is filled too: with no token the pool would refuse every call of its own.
    for key in ("agent_tokens", "acceptor_tokens"):
        if not pool.get(key):
            pool[key] = [secrets.token_urlsafe(24)]
    client.setdefault("pool", str(pool["listen"]))
    client.setdefault("leases", str(pool["lease_listen"]))
    client.setdefault("token", str(pool["agent_tokens"][0]))
    defaults: dict[str, Any] = {
        "name": "local",
        "pool": str(pool["listen"]),
        "token": str(pool["acceptor_tokens"][0]),
        "backend": "auto",
        "cpu_devices": 2,
        "state_dir": str(state / "acceptor"),
        # Port 0: the acceptor listens on a free port and registers the one it got.
        "data_address": f"{HOST}:0",
    }
    for key, value in defaults.items():
        acceptor.setdefault(key, value)
    agent.setdefault("enabled", True)
    agent.setdefault("socket", str(state / "agent.sock"))
    agent.setdefault("state_file", str(state / "agent-state.json"))
    agent.setdefault("log_file", str(state / "agent.log"))
    for service, table in (("pool", pool), ("acceptor", acceptor), ("agent", agent)):
        if "metrics" not in table:
            table["metrics"] = f"{HOST}:{_port(METRICS_PORTS[service], _taken(document))}"


def _next_port(address: str) -> str:
    """The lease socket's address: the pool's host, the next port ("" when there is none)."""
    found = addresses.split_host_port(address)
    if found is None:  # the config's check names the key
        return ""
    host, port = found
    return f"{address.rpartition(':')[0]}:{port + 1}" if port and host else ""


def _taken(document: tomlkit.TOMLDocument) -> set[int]:
    """The ports the config already names (not to be handed out twice)."""
    ports = set()
    for table, key in LISTENED:
        value = document.get(table, {}).get(key, "")
        found = addresses.split_host_port(str(value))
        if found:
            ports.add(found[1])
    return ports


def _pool_address(taken: set[int]) -> str:
    """The well-known pool port and the next when both are free, else a free pair."""
    pair = {POOL_PORT, POOL_PORT + 1}
    if not taken & pair and all(is_free(HOST, port) for port in pair):
        return f"{HOST}:{POOL_PORT}"
    return f"{HOST}:{_pick(lambda p: is_free(HOST, p) and is_free(HOST, p + 1), taken)}"


def _port(wanted: int, taken: set[int]) -> int:
    if wanted not in taken and is_free(HOST, wanted):
        return wanted
    return _pick(lambda p: is_free(HOST, p), taken)


def _pick(free: Callable[[int], bool], taken: set[int]) -> int:
    """A random port below the ephemeral range that ``free`` accepts (not one of ``taken``,
    nor the next of one: the pool's lease socket takes its port's next)."""
    for _ in range(1000):
        port = random.randrange(LOWEST_PORT, _ephemeral_start() - 1)
        if not {port, port + 1} & taken and free(port):
            return port
    raise UnavailableError(
        f"no free port on {HOST} between {LOWEST_PORT} and {_ephemeral_start()}",
        hint="stop a program that holds many, or set the ports in the config",
    )


@functools.cache
def _ephemeral_start() -> int:
    """Where the kernel's ephemeral ports (any outgoing connection's) begin."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as ports:
            return int(ports.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def is_free(host: str, port: int) -> bool:
    """Whether a server could listen on ``host:port`` now (a connection of an earlier one
    still in TIME_WAIT does not count: servers set SO_REUSEADDR). Raises OSError when the
    address cannot be listened on at all (a host that is not this machine's)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return False
            raise
    return True


def check_free(config: Config, path: Path) -> None:
    """Fail, naming the key to change in ``path``, when an address the services would listen
    on is in use (a service would only exit with 1) or is not this machine's."""
    for table, key in LISTENED:
        address = getattr(getattr(config, table), key)
        found = addresses.split_host_port(address) if address else None
        if found is None or found[1] == 0:
            continue
        host, port = found
        try:
            free = is_free(host if ":" in host else socket.gethostbyname(host), port)
        except OSError as exc:
            raise UnavailableError(
                f"cannot listen on {address} ({table}.{key} in {path}): {exc.strerror or exc}",
                hint=_instead(table, key, path, "an address of this machine"),
            ) from exc
        if not free:
            raise UnavailableError(
                f"{address} ({table}.{key} in {path}) is in use: another radium up, or "
                "another program, listens there",
                hint="stop it, or " + _instead(table, key, path, 'a free address (or "" for none)'),
            )


def _instead(table: str, key: str, path: Path, what: str) -> str:
    """How to choose another address for ``table.key``: the pool's with ``--listen``."""
    if table == "pool" and key in ("listen", "lease_listen"):
        return "give radium up another --listen (its lease socket takes the next port)"
    return f"set {table}.{key} in {path} to {what}"
