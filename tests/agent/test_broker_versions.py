"""The node agent's broker between a container and the acceptor, at the data-plane version: the
interposer's real ``dial_agent`` asks the broker's real ``dp.sock``, which dials (real
handshake) an acceptor on loopback: one of our version, and one that refuses it as a
version-1 acceptor does."""

from __future__ import annotations

import asyncio
import socket
import threading
from pathlib import Path
from typing import Callable

import pytest

from radium.agent.book import Held
from radium.agent.broker import DATA_SOCKET, ConnectionBroker
from radium_interposer import dialing, handshake, wire
from radium_interposer.errors import VersionMismatch

CREDENTIAL = "lease-secret"


def acceptor(serve: Callable[[socket.socket], None]) -> socket.socket:
    """A loopback listener whose first connection ``serve`` handles, in a thread."""
    listener = socket.create_server(("127.0.0.1", 0))

    def run() -> None:
        conn, _ = listener.accept()
        with conn:
            serve(conn)

    threading.Thread(target=run, daemon=True).start()
    return listener


def connect_through_broker(tmp_path: Path, listener: socket.socket) -> socket.socket:
    """``dial_agent`` on the broker's socket for a lease whose acceptor is ``listener``."""
    port = listener.getsockname()[1]
    held = Held(
        container="c1", lease_id="lease-1", ttl=30, pid=1, pid_started=0.0,
        runtime_dir=str(tmp_path), lease={"data_address": f"127.0.0.1:{port}"},
        credential=CREDENTIAL,
    )  # fmt: skip

    async def scenario() -> socket.socket:
        broker = ConnectionBroker(lambda container: held if container == "c1" else None)
        await broker.open(held)
        try:
            path = str(tmp_path / DATA_SOCKET)
            return await asyncio.to_thread(dialing.dial_agent, path, 30, 10)
        finally:
            broker.close_all()

    return asyncio.run(scenario())


def test_a_connection_at_our_version_is_handed_over(tmp_path: Path) -> None:
    served: list[tuple[str, int]] = []

    def serve(conn: socket.socket) -> None:
        served.append(handshake.server(conn, {"lease-1": CREDENTIAL}.get))
        frame = wire.read(conn.recv_into)  # the container's first frame, through the broker
        assert frame is not None
        wire.send(conn, wire.RESULT, frame.call_id, {"echo": frame.meta})

    with acceptor(serve) as listener, connect_through_broker(tmp_path, listener) as sock:
        wire.send(sock, wire.CALL, 7, {"op": "ping"})
        answer = wire.read(sock.recv_into)
    assert served == [("lease-1", wire.VERSION)]
    assert answer is not None and (answer.call_id, answer.meta) == (7, {"echo": {"op": "ping"}})


def test_a_version_1_acceptor_s_refusal_reaches_the_container_as_one_line(
    tmp_path: Path,
) -> None:
    def serve(conn: socket.socket) -> None:
        wire.read(conn.recv_into, wire.HANDSHAKE_LIMITS)  # HELLO
        wire.send(conn, wire.ERROR, 0, {"error": "no common protocol version (server speaks (1,))"})

    with acceptor(serve) as listener, pytest.raises(VersionMismatch) as caught:
        port = listener.getsockname()[1]
        connect_through_broker(tmp_path, listener)
    assert str(caught.value) == (
        "radium: the node agent could not connect this container: the acceptor at "
        f"127.0.0.1:{port} speaks data-plane version(s) [1], this node [{wire.VERSION}]; "
        "update Radium on the acceptor host"
    )
