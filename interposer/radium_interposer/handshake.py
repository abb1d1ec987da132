"""Data-plane handshake: version negotiation and proof of the lease credential.

The credential never crosses the wire: the client answers the server's nonce with an HMAC.
The server reads only small JSON frames (``HANDSHAKE_LIMITS``) until the proof checks out, so an
unauthenticated peer gets nothing deserialised beyond them. Spec: docs/data-plane.md.
"""

import hashlib
import hmac
import os
import re
import socket
from typing import Any, Callable, Dict, Optional, Tuple

from radium_interposer import wire

SUPPORTED = (wire.VERSION,)
_NONCE = re.compile(r"^[0-9a-f]{32}$")
_LEASE = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


class AuthenticationError(wire.ProtocolError):
    """The peer could not prove the lease credential (or refused ours)."""


def _mac(credential: str, lease_id: str, client_nonce: str, server_nonce: str) -> str:
    message = f"radium-dp-v1|{lease_id}|{client_nonce}|{server_nonce}"
    return hmac.new(credential.encode("utf-8"), message.encode("utf-8"), hashlib.sha256).hexdigest()


def _expect(sock: socket.socket, type_: int) -> Dict[str, Any]:
    frame = wire.read(sock.recv_into, wire.HANDSHAKE_LIMITS)
    if frame is None:
        raise wire.ProtocolError("the peer closed the connection during the handshake")
    if frame.type == wire.ERROR:
        raise AuthenticationError(str(frame.meta.get("error", "refused")))
    if frame.type != type_:
        raise wire.ProtocolError(f"unexpected frame type {frame.type} in the handshake")
    return frame.meta


def client(sock: socket.socket, lease_id: str, credential: str) -> int:
    """Prove ``credential`` for ``lease_id`` on a fresh connection; the agreed version."""
    nonce = os.urandom(16).hex()
    wire.send(sock, wire.HELLO, 0, {"versions": list(SUPPORTED), "lease": lease_id, "nonce": nonce})
    challenge = _expect(sock, wire.CHALLENGE)
    version, server_nonce = challenge.get("version"), challenge.get("nonce")
    if (
        version not in SUPPORTED
        or not isinstance(server_nonce, str)
        or not _NONCE.match(server_nonce)
    ):
        raise wire.ProtocolError("bad challenge from the server")
    wire.send(sock, wire.PROOF, 0, {"mac": _mac(credential, lease_id, nonce, server_nonce)})
    _expect(sock, wire.WELCOME)
    return int(version)


def server(sock: socket.socket, credential_for: Callable[[str], Optional[str]]) -> Tuple[str, int]:
    """Authenticate a client; ``credential_for(lease_id)`` gives the credential or None.

    Returns (lease id, version); raises ProtocolError (AuthenticationError) otherwise, after
    telling the client. The caller closes the connection on any error.
    """
    hello = _expect(sock, wire.HELLO)
    versions, lease_id, client_nonce = hello.get("versions"), hello.get("lease"), hello.get("nonce")
    if not (
        isinstance(versions, list) and isinstance(lease_id, str) and isinstance(client_nonce, str)
    ):
        raise wire.ProtocolError("malformed hello")
    if not _LEASE.match(lease_id) or not _NONCE.match(client_nonce):
        raise wire.ProtocolError("malformed hello")
    common = [v for v in SUPPORTED if v in versions]
    if not common:
        wire.send(
            sock,
            wire.ERROR,
            0,
            {"error": f"no common protocol version (server speaks {SUPPORTED})"},
        )
        raise wire.ProtocolError("no common protocol version")
    server_nonce = os.urandom(16).hex()
    wire.send(sock, wire.CHALLENGE, 0, {"version": max(common), "nonce": server_nonce})
    mac = _expect(sock, wire.PROOF).get("mac")
    credential = credential_for(lease_id)
    # An unknown lease is checked against a random key: the answer takes the same time.
    expected = _mac(
        credential if credential is not None else os.urandom(32).hex(),
        lease_id,
        client_nonce,
        server_nonce,
    )
    if not isinstance(mac, str) or not hmac.compare_digest(mac, expected) or credential is None:
        wire.send(sock, wire.ERROR, 0, {"error": "authentication failed"})
        raise AuthenticationError(f"lease {lease_id}: authentication failed")
    wire.send(sock, wire.WELCOME, 0, {})
    return lease_id, max(common)
