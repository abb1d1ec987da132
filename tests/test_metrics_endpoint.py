"""A daemon's /metrics endpoint: served on the configured address, or one clear error."""

from __future__ import annotations

import socket
import urllib.request

import pytest
from prometheus_client import CollectorRegistry, Counter

from radium import metrics
from radium.errors import ConfigError, UnavailableError


def test_serves_its_own_registry_and_stops() -> None:
    registry = CollectorRegistry()
    Counter("radium_test_things", "things", registry=registry).inc(3)
    endpoint = metrics.serve("127.0.0.1:0", registry, "pool.metrics")
    assert endpoint is not None
    try:
        url = f"http://127.0.0.1:{endpoint.port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as reply:
            body = reply.read().decode()
        assert "radium_test_things_total 3.0" in body
        assert "python_gc" not in body  # not the process-wide default registry
        assert "process_resident_memory_bytes" not in body  # only what was asked for
    finally:
        endpoint.close()
    with pytest.raises(OSError):
        urllib.request.urlopen(url, timeout=2)


def test_empty_address_serves_nothing() -> None:
    assert metrics.serve("", CollectorRegistry(), "agent.metrics") is None


@pytest.mark.parametrize("address", ["7410", "localhost", "host:port", ":7410", "h:99999"])
def test_a_malformed_address_names_the_key(address: str) -> None:
    with pytest.raises(ConfigError) as error:
        metrics.serve(address, CollectorRegistry(), "acceptor.metrics")
    assert error.value.one_line().startswith("config key acceptor.metrics: ")


def test_an_address_in_use_is_one_clear_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(UnavailableError) as error:
            metrics.serve(f"127.0.0.1:{port}", CollectorRegistry(), "pool.metrics")
    line = error.value.one_line()
    assert f"cannot serve metrics on 127.0.0.1:{port}" in line and "pool.metrics" in line
    assert "\n" not in line


def test_a_daemon_s_registry_has_its_process_series() -> None:
    registry = metrics.new_registry()
    assert registry.get_sample_value("process_resident_memory_bytes")
