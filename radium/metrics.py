"""A daemon's ``/metrics`` endpoint: prometheus-client's HTTP server on a configured address.

The pool, each acceptor and each node agent serve their own registry (never the process-wide
default one, so tests and embedded daemons do not mix series). The series are listed in
``docs/metrics.md``.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, ProcessCollector, start_http_server

from radium import addresses
from radium.errors import ConfigError, UnavailableError

__all__ = ["Endpoint", "new_registry", "parse_address", "serve"]

log = logging.getLogger(__name__)


def new_registry() -> CollectorRegistry:
    """A daemon's registry, with the standard ``process_*`` series of its own process (CPU,
    memory, open files)."""
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    return registry


def parse_address(address: str, key: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` too) as ``(host, port)``; a clear error naming ``key``."""
    found = addresses.split_host_port(address)
    if found is None:
        raise ConfigError(
            f"config key {key}: {address!r} is not host:port",
            hint='e.g. "127.0.0.1:7410", or "" to serve no metrics',
        )
    return found


@dataclass
class Endpoint:
    """A running ``/metrics`` server; ``port`` is the one bound (useful with port 0)."""

    server: WSGIServer
    thread: threading.Thread

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def serve(address: str, registry: CollectorRegistry, key: str) -> Endpoint | None:
    """Serve ``registry`` on ``address`` (None when it is empty: metrics are off)."""
    if not address:
        return None
    host, port = parse_address(address, key)
    try:
        server, thread = start_http_server(port, host, registry)
    except OSError as exc:
        raise UnavailableError(
            f"cannot serve metrics on {address}: {exc.strerror or exc}",
            hint=f'is the port in use? set {key} to another address, or to "" for none',
        ) from exc
    endpoint = Endpoint(server, thread)
    log.info("metrics on http://%s:%d/metrics", host, endpoint.port)
    return endpoint
