"""Data-plane handshake: version negotiation and proof of the lease credential.

The credential never crosses the wire: the client answers the server's nonce with an HMAC.
The server reads only small JSON frames (``HANDSHAKE_LIMITS``) until the proof checks out, so an
unauthenticated peer gets nothing deserialised beyond them. Spec: docs/data-plane.md.
"""

import hashlib
import hmac
import io
import os
import re
import socket
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from radium_interposer import wire
from radium_interposer.errors import VersionMismatch

__all__ = [
    "SUPPORTED",
    "AuthenticationError",
    "AuthenticationRefused",
    "FrameBuffer",
    "Refused",
    "ServerHandshake",
    "client",
    "server",
]

SUPPORTED = (wire.VERSION,)
_NONCE = re.compile(r"^[0-9a-f]{32}$")
_LEASE = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
#: How a version-1 acceptor refuses a HELLO it shares no version with (it sends no ``type``).
_V1_REFUSAL = re.compile(r"^no common protocol version \(server speaks \(([0-9, ]*)\)\)$")


class AuthenticationError(wire.ProtocolError):
    """The peer could not prove the lease credential (or refused ours)."""


def _mac(credential: str, lease_id: str, client_nonce: str, server_nonce: str) -> str:
    message = f"radium-dp-v1|{lease_id}|{client_nonce}|{server_nonce}"
    return hmac.new(credential.encode("utf-8"), message.encode("utf-8"), hashlib.sha256).hexdigest()


def _expect(sock: socket.socket, type_: int) -> Dict[str, Any]:
    return _checked(wire.read(sock.recv_into, wire.HANDSHAKE_LIMITS), type_)


def client(sock: socket.socket, lease_id: str, credential: str) -> int:
    """Prove ``credential`` for ``lease_id`` on a fresh connection; the agreed version.

    VersionMismatch when the server speaks none of our versions, whether it says so with a
    typed ERROR or, as a version-1 acceptor does, in words only.
    """
    nonce = os.urandom(16).hex()
    wire.send(sock, wire.HELLO, 0, {"versions": list(SUPPORTED), "lease": lease_id, "nonce": nonce})
    frame = wire.read(sock.recv_into, wire.HANDSHAKE_LIMITS)
    if frame is not None and frame.type == wire.ERROR:
        theirs = _refused_for(frame.meta)
        if theirs is not None:
            raise _mismatch(_address(sock), theirs, str(frame.meta.get("error", "")))
    challenge = _checked(frame, wire.CHALLENGE)
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


class Refused(wire.ProtocolError):
    """The server refuses the handshake; ``reply`` is the ERROR frame to send before closing."""

    def __init__(self, message: str, reply: bytes) -> None:
        super().__init__(message)
        self.reply = reply


class AuthenticationRefused(Refused, AuthenticationError):
    """The proof did not match the lease's credential (or the lease is unknown)."""


def _error(text: str, **extra: Any) -> bytes:
    return b"".join(wire.encode(wire.ERROR, 0, {"error": text, **extra}))


def _versions(values: List[Any]) -> List[int]:
    """The plausible version numbers of a peer's list, a few at most: they go into one line
    (and a handshake-sized frame), whatever an unauthenticated peer sent."""
    return [v for v in values if type(v) is int and 0 <= v < 1 << 16][:8]


def _refusal(versions: List[Any]) -> str:
    """The server's words for a HELLO sharing no version with it: what failed, what to do."""
    theirs, ours = _versions(versions), list(SUPPORTED)
    side = "this acceptor host" if any(v > max(ours) for v in theirs) else "the client node"
    return (
        f"data-plane version(s) {theirs} are not spoken here: this acceptor speaks {ours}; "
        f"update Radium on {side}"
    )


def _refused_for(meta: Dict[str, Any]) -> Optional[List[int]]:
    """The versions the server speaks when its ERROR refuses ours ([] when it did not say
    which); None when the ERROR refuses something else."""
    if meta.get("type") == "VersionMismatch":
        versions = meta.get("versions")
        return _versions(versions) if isinstance(versions, list) else []
    match = _V1_REFUSAL.match(str(meta.get("error", "")))
    if match is None:
        return None
    return _versions([int(v) for v in match.group(1).replace(" ", "").split(",") if v])


def _mismatch(at: str, theirs: List[int], said: str) -> VersionMismatch:
    """The client's one line for a refused version: both versions, and which side to update."""
    where = f"the acceptor at {at}" if at else "the acceptor"
    ours = list(SUPPORTED)
    if not theirs:  # a refusal that names no version: pass its own words on
        said = said.replace("\n", " ")[:200]
        return VersionMismatch(
            f"{where} speaks none of this node's data-plane versions {ours}: {said}"
        )
    side = "the acceptor host" if max(theirs) < min(ours) else "this client node"
    return VersionMismatch(
        f"{where} speaks data-plane version(s) {theirs}, this node {ours}; update Radium on {side}"
    )


def _address(sock: socket.socket) -> str:
    """The peer's ``host:port`` ("" when it has none, as a socketpair)."""
    try:
        peer = sock.getpeername()
    except OSError:
        return ""
    if not isinstance(peer, tuple) or len(peer) < 2:
        return ""
    host, port = peer[0], peer[1]
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


class FrameBuffer:
    """One handshake frame read in pieces, so a server can wait for it without a thread: it
    asks for exactly the bytes the frame still lacks (nothing after the frame is ever read:
    what follows PROOF belongs to the worker). Sizes are checked as soon as the header is in."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.size = wire.HEADER.size

    def missing(self) -> int:
        """How many more bytes the frame needs (0: it is whole)."""
        return self.size - len(self.data)

    def add(self, data: bytes) -> Optional[wire.Frame]:
        """Take bytes read (at most ``missing()``); the frame once it is whole."""
        had = len(self.data)
        self.data += data
        if had < wire.HEADER.size <= len(self.data):
            self.size = _frame_size(self.data)
        if self.missing():
            return None
        frame = wire.read(io.BytesIO(bytes(self.data)).readinto, wire.HANDSHAKE_LIMITS)
        self.data, self.size = bytearray(), wire.HEADER.size
        return frame


def _frame_size(head: bytearray) -> int:
    """The whole frame's size from its header; a header over the handshake limits (or no
    frame header at all) is refused by the frame reader's own checks."""
    fields: Tuple[int, ...] = wire.HEADER.unpack_from(head)[5:7]
    meta_len, nbuf = fields
    limits = wire.HANDSHAKE_LIMITS
    if meta_len > limits.max_meta or nbuf > limits.max_buffers or head[:4] != wire.MAGIC:
        wire.read(io.BytesIO(bytes(head[: wire.HEADER.size])).readinto, limits)
        raise wire.ProtocolError("bad frame header")  # the reader always refuses first
    return wire.HEADER.size + wire.BUFLEN.size * nbuf + meta_len


def _checked(frame: Optional[wire.Frame], type_: int) -> Dict[str, Any]:
    if frame is None:
        raise wire.ProtocolError("the peer closed the connection during the handshake")
    if frame.type == wire.ERROR:
        raise AuthenticationError(str(frame.meta.get("error", "refused")))
    if frame.type != type_:
        raise wire.ProtocolError(f"unexpected frame type {frame.type} in the handshake")
    return frame.meta


class ServerHandshake:
    """The server's side of one handshake, fed whole frames and answering with the bytes to
    send: the same steps for a blocking server (:func:`server`) and the acceptor's listener,
    which waits for frames without a thread per connection."""

    def __init__(self) -> None:
        self.lease = ""
        self.version = 0
        self.mac: object = None
        self._client_nonce = ""
        self._server_nonce = ""

    def hello(self, frame: Optional[wire.Frame]) -> bytes:
        """Check HELLO; the CHALLENGE to send. Refused (with its ERROR) without a common version."""
        hello = _checked(frame, wire.HELLO)
        versions, lease_id, nonce = hello.get("versions"), hello.get("lease"), hello.get("nonce")
        if not (
            isinstance(versions, list) and isinstance(lease_id, str) and isinstance(nonce, str)
        ):
            raise wire.ProtocolError("malformed hello")
        if not _LEASE.match(lease_id) or not _NONCE.match(nonce):
            raise wire.ProtocolError("malformed hello")
        common = [v for v in SUPPORTED if v in versions]
        if not common:
            # Typed, with our versions, so the client can name both; older clients show the text.
            text = _refusal(versions)
            raise Refused(text, _error(text, type="VersionMismatch", versions=list(SUPPORTED)))
        self.lease, self.version, self._client_nonce = lease_id, max(common), nonce
        self._server_nonce = os.urandom(16).hex()
        challenge = {"version": self.version, "nonce": self._server_nonce}
        return b"".join(wire.encode(wire.CHALLENGE, 0, challenge))

    def proof(self, frame: Optional[wire.Frame]) -> None:
        """Take PROOF; :meth:`verify` checks it against the lease's credential."""
        self.mac = _checked(frame, wire.PROOF).get("mac")

    def verify(self, credential: Optional[str]) -> bytes:
        """The WELCOME to send; Refused (with its ERROR) unless the proof matches."""
        # An unknown lease is checked against a random key: the answer takes the same time.
        key = credential if credential is not None else os.urandom(32).hex()
        expected = _mac(key, self.lease, self._client_nonce, self._server_nonce)
        mac = self.mac
        if not isinstance(mac, str) or not hmac.compare_digest(mac, expected) or credential is None:
            raise AuthenticationRefused(
                f"lease {self.lease}: authentication failed", _error("authentication failed")
            )
        return b"".join(wire.encode(wire.WELCOME, 0, {}))


def _within(sock: socket.socket, deadline: Optional[float]) -> socket.socket:
    """``sock`` with its timeout set to what is left of ``deadline`` (None: as it is)."""
    if deadline is not None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("the handshake took too long")
        sock.settimeout(left)
    return sock


def _read_frame(sock: socket.socket, deadline: Optional[float]) -> Optional[wire.Frame]:
    buffer = FrameBuffer()
    while True:
        data = _within(sock, deadline).recv(buffer.missing())
        if not data:
            if buffer.data:
                raise wire.ProtocolError("connection closed in a frame")
            return None
        frame = buffer.add(data)
        if frame is not None:
            return frame


def server(
    sock: socket.socket,
    credential_for: Callable[[str], Optional[str]],
    deadline: Optional[float] = None,
) -> Tuple[str, int]:
    """Authenticate a client; ``credential_for(lease_id)`` gives the credential or None.

    ``deadline`` (``time.monotonic()``) bounds the whole exchange, however slowly the peer
    sends; without one the socket's own timeout applies to each read. Returns (lease id,
    version); raises ProtocolError (AuthenticationError) otherwise, after telling the client.
    The caller closes the connection on any error.
    """
    state = ServerHandshake()
    try:
        challenge = state.hello(_read_frame(sock, deadline))
        _within(sock, deadline).sendall(challenge)
        state.proof(_read_frame(sock, deadline))
        welcome = state.verify(credential_for(state.lease))
    except Refused as exc:
        _within(sock, deadline).sendall(exc.reply)
        raise
    _within(sock, deadline).sendall(welcome)
    return state.lease, state.version
