"""Reading a data-plane socket with a spin before sleeping (docs/data-plane.md, "Waiting for
the peer").

A round trip between two processes that block in ``recv`` costs two wake-ups: the kernel must
schedule the sleeping side again when the bytes arrive, which on a virtual machine is tens of
microseconds each (a raw ping-pong here: ~45 µs blocking, ~5 µs when both sides poll). So a
reader first polls its socket, without blocking, giving the CPU to any other runnable thread
between polls, and only then blocks. How long it polls follows how long its connection's
answers take (:class:`SpinningSocket`), within a cap that bounds what a long wait costs (a call
that computes for a second polls its first few hundred microseconds at most, then sleeps).
With one CPU to run on, or a cgroup quota under one CPU, nothing spins; on a busy CPU (a poll
that lost the CPU to another task) a read stops polling and sleeps. This is read per
connection (a worker is put in its lease's cgroup after it starts).
"""

from __future__ import annotations

import io
import os
import socket
import time
from typing import Any, Callable, Optional, Tuple

from radium_interposer import settings

__all__ = ["CAP_US", "FLOOR_US", "SpinningSocket", "cap_us", "reader"]

#: Microseconds a reader polls at least before it blocks (SpinningSocket: it polls longer
#: when its connection's answers typically take longer, up to the cap).
FLOOR_US = 50
#: The most microseconds a reader polls, unless ``RADIUM_SPIN_US`` says otherwise.
CAP_US = 1000
#: A poll that took longer than this (seconds) lost the CPU to another task: the machine is
#: busy, and a task that yields waits behind the others while a sleeper is woken at once.
_PREEMPTED = 20e-6
#: The buffered reader's size: a frame and its small neighbours in one ``recv``.
_BUFFER = 1 << 16


def cap_us(environ: Any = os.environ, machine: Optional[Tuple[int, Optional[float]]] = None) -> int:
    """The most microseconds a read polls: ``RADIUM_SPIN_US`` (0 turns polling off) when it is
    a whole number from 0 to 10 000, else :data:`CAP_US`. 0 when this process may run on one
    CPU only (a polling reader would hold the CPU its peer needs) or its cgroup's quota is
    under one CPU (a lease of a fraction of a CPU does not spend it waiting). ``machine``: the
    CPUs it may run on and its quota (None: no quota), read now when not given."""
    cpus, quota = machine or (len(os.sched_getaffinity(0)), settings.cgroup_quota())
    if cpus < 2 or (quota is not None and quota < 1):
        return 0
    text = environ.get("RADIUM_SPIN_US", "")
    if text.isdigit() and int(text) <= 10_000:
        return int(text)
    return CAP_US


class SpinningSocket(io.RawIOBase):
    """A socket's receiving side as a raw stream whose reads poll before they block. Closing
    it leaves the socket open (its owner closes that).

    How long a read polls follows how long this connection's waits take: twice their moving
    average, at least ``floor`` seconds and at most ``cap``; when they are typically longer than
    half the cap (a peer that computes, or thinks, for longer), only the floor, since polling
    that cannot catch the answer only burns the CPU. Over loopback an answer takes tens of
    microseconds; over a datacenter link hundreds."""

    def __init__(
        self,
        sock: socket.socket,
        cap: float,
        floor: float = FLOOR_US / 1e6,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        super().__init__()
        self._recv_into = sock.recv_into
        self._cap, self._floor, self._clock = cap, min(floor, cap), clock
        #: The moving average of this connection's waits (each counted at most 10 caps).
        self.typical = self._floor

    def readable(self) -> bool:
        return True

    def budget(self) -> float:
        """How long the next wait polls."""
        want = 2 * self.typical
        return want if self._floor < want <= self._cap else self._floor

    def readinto(self, buffer: Any) -> int:
        recv_into = self._recv_into
        try:
            return recv_into(buffer, 0, socket.MSG_DONTWAIT)
        except BlockingIOError:
            pass
        clock = self._clock
        started = now = clock()
        deadline = started + self.budget()
        got = -1
        while now < deadline:
            os.sched_yield()  # a thread of the peer's, or our own, may share this CPU
            try:
                got = recv_into(buffer, 0, socket.MSG_DONTWAIT)
                break
            except BlockingIOError:
                pass
            polled, now = now, clock()
            if now - polled > _PREEMPTED:
                break  # another task had this CPU: a sleeper is woken sooner than a yielder
        if got < 0:
            got = recv_into(buffer)
        waited = min(clock() - started, 10 * self._cap)
        self.typical += (waited - self.typical) / 8
        return got


def reader(sock: socket.socket, cap: Optional[int] = None) -> io.BufferedReader:
    """A buffered reader of ``sock`` whose refills poll at most ``cap`` microseconds (this
    process's :func:`cap_us` when not given; 0, or a socket with a timeout, whose reads poll
    first anyway: a plain one)."""
    if cap is None:
        cap = cap_us()
    if cap <= 0 or sock.gettimeout() is not None:
        return io.BufferedReader(socket.SocketIO(sock, "rb"), _BUFFER)  # sock.makefile's
    return io.BufferedReader(SpinningSocket(sock, cap / 1e6), _BUFFER)
