"""The acceptor side of benchmarks/dataplane.py, run inside the acceptor's network namespace.

It serves on one address: the real data plane (``DataPlane`` + a lease slot with its worker),
a raw-socket echo (the floor any protocol is measured against; another one whose reads spin
as the data plane's do), a grpcio unary echo, and rpyc's
and Pyro5's noop (benchmarks/dataplane_extra.py) where they are installed. It prints ``ready``
and runs until its stdin closes.
"""

from __future__ import annotations

import socket
import struct
import sys
import tempfile
import threading
from concurrent import futures
from typing import Callable

import grpc

from benchmarks.dataplane_extra import serve_peers
from radium.acceptor.dataplane import DataPlane
from radium.acceptor.devices import CpuBackend
from radium.acceptor.slots import Slots
from radium.proto import pool_pb2 as pb
from radium_interposer import spin

LEASE, CREDENTIAL = "bench", "bench-credential"
SIZE = struct.Struct("<QQ")  # bytes the client sends, bytes it wants back
#: The spinning raw echo's cap: the data plane's default (radium_interposer.spin).
SPIN_S = spin.CAP_US / 1e6


def _recv_exact(recv_into: Callable[[memoryview], int], size: int) -> bytearray:
    buf = bytearray(size)
    view, got = memoryview(buf), 0
    while got < size:
        n = recv_into(view[got:])
        if not n:
            raise EOFError
        got += n
    return buf


def _raw_client(conn: socket.socket, spinning: bool) -> None:
    """Each request: a header (sizes), the payload; the answer: ``want`` bytes. ``spinning``:
    reads poll before they block, as the data plane's do (radium_interposer.spin)."""
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    recv_into = spin.SpinningSocket(conn, SPIN_S).readinto if spinning else conn.recv_into
    replies: dict[int, bytes] = {}
    with conn:
        try:
            while True:
                send, want = SIZE.unpack(_recv_exact(recv_into, SIZE.size))
                _recv_exact(recv_into, send)
                reply = replies.get(want) or replies.setdefault(want, b"r" * want)
                conn.sendall(reply)
        except (EOFError, OSError):
            return


def raw_echo(host: str, port: int, spinning: bool = False) -> None:
    listener = socket.create_server((host, port))
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=_raw_client, args=(conn, spinning), daemon=True).start()


def grpc_echo(host: str, port: int) -> grpc.Server:
    def echo(request: bytes, context: object) -> bytes:
        return request

    handler = grpc.method_handlers_generic_handler(
        "bench.Echo", {"Call": grpc.unary_unary_rpc_method_handler(echo)}
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"{host}:{port}")
    server.start()
    return server


def main(argv: list[str]) -> int:
    host, port = argv[0], int(argv[1])
    slots = Slots(tempfile.mkdtemp(prefix="radium-bench-"), CpuBackend(1, 1024))
    slots.prepare(pb.Lease(id=LEASE, device_ids=["cpu0"], credential=CREDENTIAL))
    plane = DataPlane(f"{host}:{port}", slots)
    plane.start()
    threading.Thread(target=raw_echo, args=(host, port + 1), daemon=True).start()
    threading.Thread(target=raw_echo, args=(host, port + 5, True), daemon=True).start()
    server = grpc_echo(host, port + 2)
    serve_peers(host, port)  # rpyc at port + 3, Pyro5 at + 4, those installed
    # Workers start at their lease's first connection; start this one now, so that the first
    # measured call does not pay for it.
    print("ready", slots.worker(LEASE).pid, flush=True)
    sys.stdin.read()
    server.stop(0)
    plane.stop()
    slots.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
