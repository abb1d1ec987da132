"""Reading a data-plane socket with a short spin before sleeping (docs/data-plane.md,
"Waiting for the peer").

A round trip between two processes that block in ``recv`` costs two wake-ups: the kernel must
schedule the sleeping side again when the bytes arrive, which on a virtual machine is tens of
microseconds each (a raw ping-pong here: ~45 µs blocking, ~5 µs when both sides poll). So a
reader first polls its socket, without blocking, for a short budget, giving the CPU to any other
runnable thread between polls, and only then blocks. The budget bounds what a long wait costs
(a call that computes for a second spins its first few microseconds, then sleeps). With one
CPU to run on, or a cgroup quota under one CPU, nothing spins. The budget is read per
connection (a worker is put in its lease's cgroup after it starts).
"""

from __future__ import annotations

import io
import os
import socket
import time
from typing import Any, Optional, Tuple

from radium_interposer import settings

__all__ = ["BUDGET_US", "SpinningSocket", "budget_us", "reader"]

#: Microseconds a reader polls before it blocks, unless ``RADIUM_SPIN_US`` says otherwise.
BUDGET_US = 50
#: The buffered reader's size: a frame and its small neighbours in one ``recv``.
_BUFFER = 1 << 16


def budget_us(
    environ: Any = os.environ, machine: Optional[Tuple[int, Optional[float]]] = None
) -> int:
    """The spin budget in microseconds: ``RADIUM_SPIN_US`` (0 turns spinning off) when it is a
    whole number from 0 to 10 000, else :data:`BUDGET_US`. 0 when this process may run on one
    CPU only (a spinning reader would hold the CPU its peer needs) or its cgroup's quota is
    under one CPU (a lease of a fraction of a CPU does not spend it waiting). ``machine``: the
    CPUs it may run on and its quota (None: no quota), read now when not given."""
    cpus, quota = machine or (len(os.sched_getaffinity(0)), settings.cgroup_quota())
    if cpus < 2 or (quota is not None and quota < 1):
        return 0
    text = environ.get("RADIUM_SPIN_US", "")
    if text.isdigit() and int(text) <= 10_000:
        return int(text)
    return BUDGET_US


class SpinningSocket(io.RawIOBase):
    """A socket's receiving side as a raw stream whose reads poll for ``budget`` seconds before
    they block. Closing it leaves the socket open (its owner closes that)."""

    def __init__(self, sock: socket.socket, budget: float) -> None:
        super().__init__()
        self._recv_into = sock.recv_into
        self._budget = budget

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        recv_into = self._recv_into
        try:
            return recv_into(buffer, 0, socket.MSG_DONTWAIT)
        except BlockingIOError:
            pass
        deadline = time.perf_counter() + self._budget
        while time.perf_counter() < deadline:
            os.sched_yield()  # a thread of the peer's, or our own, may share this CPU
            try:
                return recv_into(buffer, 0, socket.MSG_DONTWAIT)
            except BlockingIOError:
                pass
        return recv_into(buffer)


def reader(sock: socket.socket, budget: int) -> io.BufferedReader:
    """A buffered reader of ``sock`` that spins ``budget`` microseconds (0, or a socket with a
    timeout, whose reads poll first anyway: a plain one)."""
    if budget <= 0 or sock.gettimeout() is not None:
        return io.BufferedReader(socket.SocketIO(sock, "rb"), _BUFFER)  # sock.makefile's
    return io.BufferedReader(SpinningSocket(sock, budget / 1e6), _BUFFER)
