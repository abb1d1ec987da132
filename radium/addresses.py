"""``host:port`` as the config file and the command line write it (``[v6]:port`` too): parsed,
or refused with one line that names the config key it came from."""

from __future__ import annotations

from radium.errors import ConfigError

__all__ = ["parse_address", "parse_addresses", "split_host_port"]


def parse_address(address: str, key: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` too) as ``(host, port)``; a clear error naming ``key``."""
    if "," in address:
        raise ConfigError(f"config key {key} is one host:port, got {address!r}")
    return _host_port(address, key, address, "")


def parse_addresses(text: str, key: str) -> list[tuple[str, int]]:
    """``host:port`` or a comma-separated list of them, in order (a pool's replicas)."""
    form = " (or a comma-separated list)"
    return [_host_port(part.strip(), key, text, form) for part in text.split(",")]


def _host_port(part: str, key: str, text: str, form: str) -> tuple[str, int]:
    found = split_host_port(part)
    if found is None:
        raise ConfigError(f"config key {key} must be host:port{form}, got {text!r}")
    return found


def split_host_port(address: str, any_host: str = "") -> tuple[str, int] | None:
    """``host:port`` (``[v6]:port`` too) as ``(host, port)``; None when it is not one. With
    ``any_host``, ``:port`` (no host) means that host (a listener's every interface)."""
    host, sep, port = address.rpartition(":")
    host = host.strip("[]") or any_host
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        return None
    return host, int(port)
