"""A worker's start-up (``python -m radium_interposer.worker``): its arguments, what it puts in
place before the tenant's first call (captured output and warnings, the client's files, the
unpickler), and the control socket it serves until the acceptor closes it."""

from __future__ import annotations

import argparse
import functools
import logging
import socket
import sys
import threading
from typing import Any, List, Optional

from radium_interposer import (
    client_files,
    codec,
    exits,
    worker_files,
    worker_pickled,
    worker_warnings,
)
from radium_interposer.control import READY, serve
from radium_interposer.worker_context import Capture

__all__ = ["run", "serve_connection"]

log = logging.getLogger("radium.worker")


def serve_connection(worker: Any, fd: int) -> None:
    """Serve a connection the acceptor handed over, in its own thread."""
    sock = socket.socket(fileno=fd)
    if sock.family != socket.AF_UNIX:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    threading.Thread(target=worker.serve, args=(sock,), daemon=True).start()


def run(worker: Any, argv: Optional[List[str]] = None) -> int:
    """Start ``worker`` (a :class:`radium_interposer.worker.Worker`) as ``argv`` says."""
    parser = argparse.ArgumentParser(prog="radium-worker")
    control_from = parser.add_mutually_exclusive_group(required=True)
    control_from.add_argument("--control-fd", type=int, help="inherited from the acceptor")
    control_from.add_argument(
        "--control-socket", help="the acceptor's unix socket to connect to (container mode)"
    )
    parser.add_argument("--lease", default="")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format=f"%(asctime)s worker[{args.lease}] %(levelname)s %(message)s"
    )
    # The client's own library objects (tag pk): only a worker unpickles.
    codec.unpickle = functools.partial(worker_pickled.load, table=worker.table)
    codec.rebuild_exception = exits.rebuild  # a `with` body's exception, to a remote __exit__
    worker_files.install()  # before any library keeps the real open
    client_files.connect(worker.sessions.call_current)
    sys.stdout = Capture(sys.stdout, "stdout", worker.local)
    sys.stderr = Capture(sys.stderr, "stderr", worker.local)
    worker_warnings.install(worker.local)  # each warning to its call's program
    exits.local = worker.local  # a remote __exit__ sees the failures of its body's calls
    if args.control_socket:
        control = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        control.connect(args.control_socket)
    else:
        control = socket.socket(fileno=args.control_fd)
    log.info("worker for lease %s ready", args.lease)
    control.sendall(READY)
    serve(
        control, functools.partial(serve_connection, worker), worker.preempt, worker.stats.snapshot
    )
    log.info("control socket closed; worker exits")
    return 0
