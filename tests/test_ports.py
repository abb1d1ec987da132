"""Test servers' ports come from below the ephemeral range, where no outgoing connection takes
them between the pick and the bind, and never twice."""

from __future__ import annotations

import socket

from tests.ports import LOWEST, _ephemeral_start, free_port


def test_ports_are_below_the_ephemeral_range_distinct_and_bindable() -> None:
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    assert all(LOWEST <= port < _ephemeral_start() for port in ports)
    with socket.socket() as s:
        s.bind(("127.0.0.1", ports[-1]))
