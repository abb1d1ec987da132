"""How the interposer gets a connection to its lease's worker: from the node agent over the
container's private socket (already authenticated: the container holds no secret and needs no
route), or, for tests and benchmarks, straight from the acceptor. Spec: docs/data-plane.md,
docs/agent-protocol.md."""

from __future__ import annotations

import json
import os
import socket
from typing import Optional

from radium_interposer import RUNTIME_DIR, wire
from radium_interposer.errors import WorkerGone

__all__ = ["dial", "dial_agent"]


def dial() -> socket.socket:
    """A connected, authenticated socket to the lease's worker."""
    direct = os.environ.get("RADIUM_DP_DIRECT")
    if direct:  # tests and benchmarks: dial the acceptor with a credential in the environment
        from radium_interposer import handshake  # (its hmac, hashlib: not at every start)

        host, _, port = direct.rpartition(":")
        sock = socket.create_connection((host, int(port)), timeout=30)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        handshake.client(sock, os.environ["RADIUM_LEASE"], os.environ["RADIUM_LEASE_CREDENTIAL"])
        sock.settimeout(None)
        return sock
    path = os.environ.get("RADIUM_DP_SOCKET") or os.path.join(RUNTIME_DIR, "dp.sock")
    return dial_agent(path, 60, None)


def dial_agent(path: str, timeout: float, then: Optional[float]) -> socket.socket:
    """A connection to the lease's worker, asked of the node agent's ``path`` within
    ``timeout`` (the socket's timeout is ``then`` afterwards). VersionMismatch when the agent
    negotiated another data-plane version than this interposer's, or none with the acceptor."""
    from radium_interposer.errors import VersionMismatch  # here: this edit stays in one function

    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as agent:
            agent.settimeout(timeout)
            _connect_unix(agent, path)
            agent.sendall(b'{"op": "connect"}\n')
            data, fd = wire.recv_fd(agent)
    except OSError as exc:
        raise WorkerGone(
            f"radium: cannot reach the node agent at {path} ({exc.strerror or exc}); "
            "was this container started with a Radium request (e.g. RADIUM_GPUS=1)?"
        ) from None
    try:
        reply = json.loads(data.decode("utf-8", "replace"))
    except ValueError:
        reply = {"error": "the node agent answered garbage"}
    if fd is None or not isinstance(reply, dict) or not reply.get("ok"):
        if fd is not None:
            os.close(fd)
        error = reply.get("error", "no connection") if isinstance(reply, dict) else "garbage"
        # The acceptor refused the agent's version: the agent's line, raised as its own type.
        refused = isinstance(reply, dict) and reply.get("type") == "VersionMismatch"
        kind = VersionMismatch if refused else WorkerGone
        raise kind(f"radium: the node agent could not connect this container: {error}")
    # The agent did the handshake, so the socket speaks its version; one from before version 2
    # does not say it.
    version = reply.get("v", 1)
    if type(version) is not int or version != wire.VERSION:
        os.close(fd)
        older = type(version) is int and version < wire.VERSION
        fix = (
            "restart the node agent (radium agent) so it runs the Radium installed on this node"
            if older
            else "restart this container so it loads the Radium installed on this node"
        )
        raise VersionMismatch(
            f"radium: the node agent speaks data-plane version {version}, "
            f"this interposer {wire.VERSION}: {fix}"
        )
    sock = socket.socket(fileno=fd)
    sock.settimeout(then)
    return sock


def _connect_unix(sock: socket.socket, path: str) -> None:
    if len(os.fsencode(path)) < 100:
        sock.connect(path)
        return
    # Longer than sun_path allows: go through the directory's descriptor.
    fd = os.open(os.path.dirname(path), os.O_PATH | os.O_DIRECTORY)
    try:
        sock.connect(f"/proc/self/fd/{fd}/{os.path.basename(path)}")
    finally:
        os.close(fd)
