"""File descriptors passed over unix sockets (SCM_RIGHTS), and sends with a deadline that
leave the socket's mode alone: how the agent hands a container its data-plane socket and a
worker its connections. :mod:`radium_interposer.wire` re-exports them."""

from __future__ import annotations

import os
import select
import socket
import struct
import time
from typing import Optional

__all__ = ["recv_fd", "send_fd", "send_within"]


def send_fd(sock: socket.socket, message: bytes, fd: int, timeout: Optional[float] = None) -> None:
    """Send ``message`` with a file descriptor attached (SCM_RIGHTS) over a unix socket.

    With ``timeout`` (seconds; 0: only if it goes at once) a peer that does not read fails the
    send with ``socket.timeout`` instead of blocking the sender: the socket's own mode is left
    alone, as other threads may use it.
    """
    rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", fd))]
    if timeout is None:
        sock.sendmsg([message], rights)
        return
    deadline = time.monotonic() + timeout
    while True:
        try:
            sent = sock.sendmsg([message], rights, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            _wait_writable(sock, deadline)
            continue
        if sent < len(message):  # the descriptor went with the first byte
            send_within(sock, message[sent:], max(0.0, deadline - time.monotonic()))
        return


def send_within(sock: socket.socket, data: bytes, timeout: float) -> None:
    """``sock.sendall(data)``, but failing with ``socket.timeout`` once ``timeout`` seconds
    have passed, without changing the socket's mode (other threads may use it)."""
    deadline = time.monotonic() + timeout
    view = memoryview(data)
    while view:
        try:
            view = view[sock.send(view, socket.MSG_DONTWAIT) :]
        except (BlockingIOError, InterruptedError):
            _wait_writable(sock, deadline)


def _wait_writable(sock: socket.socket, deadline: float) -> None:
    left = deadline - time.monotonic()
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLOUT)
    if left <= 0 or not poller.poll(left * 1000):
        raise socket.timeout("the peer is not reading")


def recv_fd(sock: socket.socket, size: int = 65536) -> tuple[bytes, Optional[int]]:
    """One message and the descriptor attached to it, if any (Python 3.8 has no recv_fds)."""
    data, ancillary, _flags, _addr = sock.recvmsg(size, socket.CMSG_SPACE(struct.calcsize("i")))
    fd: Optional[int] = None
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            usable = len(payload) - len(payload) % struct.calcsize("i")
            fds = list(struct.unpack(f"{usable // 4}i", payload[:usable]))
            fd, extra = (fds[0], fds[1:]) if fds else (None, [])
            for other in extra:  # never leak a descriptor a peer slipped in
                os.close(other)
    return data, fd
