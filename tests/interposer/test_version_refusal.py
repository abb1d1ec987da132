"""Peers of another data-plane version are refused in words (docs/data-plane.md, "Handshake"):
both directions of the handshake, against peers speaking raw frames as the other version does,
and the node agent's ``v``, which says what the socket it hands over speaks."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

import radium_interposer
from radium_interposer import dialing, handshake, wire
from radium_interposer.errors import VersionMismatch, WorkerGone

NONCE = "0" * 32
#: Ours, and the versions before and after it.
V, OLD, NEW = wire.VERSION, wire.VERSION - 1, wire.VERSION + 1
#: What a version-1 acceptor answers a HELLO it shares no version with (its handshake.py).
V1_REFUSAL = {"error": "no common protocol version (server speaks (1,))"}


def refusal_of(versions: list[Any]) -> tuple[dict[str, Any], handshake.Refused]:
    """The ERROR our server sends a HELLO offering ``versions``, and what it raised."""
    a, b = socket.socketpair()
    with a, b:
        wire.send(a, wire.HELLO, 0, {"versions": versions, "lease": "l-abc", "nonce": NONCE})
        with pytest.raises(handshake.Refused) as refused:
            handshake.server(b, {"l-abc": "s3cret"}.get)
        b.close()  # as its caller does on any error
        frame = wire.read(a.recv_into, wire.HANDSHAKE_LIMITS)
        assert frame is not None and frame.type == wire.ERROR
        assert wire.read(a.recv_into, wire.HANDSHAKE_LIMITS) is None  # nothing after it
        return frame.meta, refused.value


def test_an_older_client_is_told_to_update_the_client_node() -> None:
    meta, refused = refusal_of([OLD])
    text = (
        f"data-plane version(s) [{OLD}] are not spoken here: this acceptor speaks [{V}]; "
        "update Radium on the client node"
    )
    assert meta == {"error": text, "type": "VersionMismatch", "versions": [V]}
    assert str(refused) == text  # what the acceptor logs


def test_a_newer_client_is_told_to_update_the_acceptor_host() -> None:
    meta, _ = refusal_of([NEW, NEW + 1])
    assert meta["error"] == (
        f"data-plane version(s) [{NEW}, {NEW + 1}] are not spoken here: "
        f"this acceptor speaks [{V}]; update Radium on this acceptor host"
    )


def test_a_refusal_echoes_only_a_few_plausible_versions() -> None:
    """The HELLO is unauthenticated: what goes back into the one line is bounded."""
    meta, _ = refusal_of([str(V), True, -1, 1 << 40, *range(NEW, NEW + 37)])
    echoed = ", ".join(str(v) for v in range(NEW, NEW + 8))
    assert meta["error"].startswith(f"data-plane version(s) [{echoed}] are not")


def v1_acceptor(answer: dict[str, Any]) -> tuple[socket.socket, list[dict[str, Any]]]:
    """A listener on loopback that reads one HELLO and answers ``answer`` as an ERROR, as an
    acceptor of another version does; the HELLOs it read."""
    listener = socket.create_server(("127.0.0.1", 0))
    hellos: list[dict[str, Any]] = []

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            frame = wire.read(conn.recv_into, wire.HANDSHAKE_LIMITS)
            assert frame is not None
            hellos.append(frame.meta)
            wire.send(conn, wire.ERROR, 0, answer)

    threading.Thread(target=serve, daemon=True).start()
    return listener, hellos


def test_a_version_1_acceptor_s_refusal_names_it_and_both_versions() -> None:
    listener, hellos = v1_acceptor(V1_REFUSAL)
    port = listener.getsockname()[1]
    with (
        listener,
        socket.create_connection(("127.0.0.1", port), timeout=10) as sock,
        pytest.raises(radium_interposer.VersionMismatch) as caught,
    ):
        handshake.client(sock, "l-abc", "s3cret")
    assert str(caught.value) == (
        f"the acceptor at 127.0.0.1:{port} speaks data-plane version(s) [1], this node [{V}]; "
        "update Radium on the acceptor host"
    )
    assert isinstance(caught.value, WorkerGone)  # what programs already catch for a lost worker
    assert hellos[0]["versions"] == [V]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (
            {"error": "…", "type": "VersionMismatch", "versions": [NEW]},
            f"the acceptor speaks data-plane version(s) [{NEW}], this node [{V}]; "
            "update Radium on this client node",
        ),
        (
            {"error": "too old\nreally", "type": "VersionMismatch"},
            f"the acceptor speaks none of this node's data-plane versions [{V}]: too old really",
        ),
    ],
)
def test_a_typed_refusal_is_a_version_mismatch(answer: dict[str, Any], expected: str) -> None:
    a, b = socket.socketpair()  # no address to name
    with a, b:
        wire.send(b, wire.ERROR, 0, answer)
        with pytest.raises(VersionMismatch) as caught:
            handshake.client(a, "l-abc", "s3cret")
    assert str(caught.value) == expected


def test_other_refusals_stay_authentication_errors() -> None:
    a, b = socket.socketpair()
    with a, b:
        wire.send(b, wire.ERROR, 0, {"error": "no common protocol version (server speaks soon)"})
        with pytest.raises(handshake.AuthenticationError, match="speaks soon"):
            handshake.client(a, "l-abc", "s3cret")


class FakeAgent:
    """A node agent's ``dp.sock`` that answers ``connect`` with ``reply``, passing one end of a
    socketpair (``far`` is the other: the "worker")."""

    def __init__(self, root: Path, reply: dict[str, Any]) -> None:
        self.path = str(root / "dp.sock")
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(self.path)
        self.listener.listen(1)
        near, self.far = socket.socketpair()
        self.far.settimeout(10)
        self.request = b""

        def serve() -> None:
            conn, _ = self.listener.accept()
            with conn, near:
                self.request = conn.recv(1024)
                wire.send_fd(conn, json.dumps(reply).encode() + b"\n", near.fileno())

        threading.Thread(target=serve, daemon=True).start()

    def close(self) -> None:
        self.listener.close()
        self.far.close()


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (
            {"ok": True},
            f"radium: the node agent speaks data-plane version 1, this interposer {V}: restart the "
            "node agent (radium agent) so it runs the Radium installed on this node",
        ),
        (
            {"ok": True, "v": NEW},
            f"radium: the node agent speaks data-plane version {NEW}, this interposer {V}: restart "
            "this "
            "container so it loads the Radium installed on this node",
        ),
    ],
)
def test_a_socket_the_agent_negotiated_at_another_version_is_refused(
    tmp_path: Path, reply: dict[str, Any], expected: str
) -> None:
    agent = FakeAgent(tmp_path, reply)
    try:
        with pytest.raises(VersionMismatch) as caught:
            dialing.dial_agent(agent.path, 10, None)
        assert str(caught.value) == expected
        assert agent.far.recv(1) == b""  # the handed-over socket was closed, not leaked
    finally:
        agent.close()


def test_a_socket_at_our_version_is_used(tmp_path: Path) -> None:
    agent = FakeAgent(tmp_path, {"ok": True, "v": wire.VERSION})
    try:
        with dialing.dial_agent(agent.path, 10, None) as sock:
            sock.sendall(b"ping")
            assert agent.far.recv(4) == b"ping"
        assert json.loads(agent.request) == {"op": "connect"}
    finally:
        agent.close()


def test_the_agent_s_version_refusal_reaches_the_program_as_its_line(tmp_path: Path) -> None:
    line = f"the acceptor at 10.0.0.5:7000 speaks data-plane version(s) [1], this node [{V}]; ..."
    reply = {"ok": False, "error": line, "type": "VersionMismatch"}
    listener = socket.socket(socket.AF_UNIX)
    path = str(tmp_path / "dp.sock")
    listener.bind(path)
    listener.listen(1)

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(1024)
            conn.sendall(json.dumps(reply).encode() + b"\n")  # no socket, as the agent does

    threading.Thread(target=serve, daemon=True).start()
    with listener, pytest.raises(VersionMismatch) as caught:
        dialing.dial_agent(path, 10, None)
    assert str(caught.value) == f"radium: the node agent could not connect this container: {line}"
