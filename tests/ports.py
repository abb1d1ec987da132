"""Free loopback ports for the servers tests start (unit and integration alike).

They are picked below the kernel's ephemeral range. A port from that range (what binding port
0 gives) can go to any outgoing connection on the machine between the test letting it go and
its server binding it: a 3-member etcd of a test once failed so ("bind: address already in
use"). Each port is handed out once per process, so two servers of one test never share one.
"""

from __future__ import annotations

import random
import socket

from radium.upconfig import _ephemeral_start  # the same rule as radium up's own ports

#: The lowest port handed out.
LOWEST = 10_000
_given: set[int] = set()


def free_port(host: str = "127.0.0.1") -> int:
    end = _ephemeral_start()
    if end - LOWEST < 1000:  # a machine whose ephemeral range starts low: the kernel's pick
        with socket.socket() as s:
            s.bind((host, 0))
            return int(s.getsockname()[1])
    for _ in range(1000):
        port = random.randrange(LOWEST, end)
        if port in _given:
            continue
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:  # a server listens there, or a connection lingers
                continue
        _given.add(port)
        return port
    raise RuntimeError(f"no free port on {host} between {LOWEST} and {end}")
