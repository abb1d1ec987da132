"""gRPC plumbing shared by every control-plane service and client.

The one table mapping Radium's error kinds to gRPC status codes lives here, with both
directions of translation, and channel creation, plain or TLS. The server's side of every
call (who may call, and where a raised error becomes the call's status) is :mod:`rpc_guard`.
"""

from __future__ import annotations

import logging
import socket
from typing import (
    TYPE_CHECKING,
    Any,
    Iterable,
    Mapping,
    NoReturn,
)

import grpc
import grpc.aio

from radium import errors
from radium.configtree import TlsConfig
from radium.errors import ConfigError, Kind, RadiumError

if TYPE_CHECKING:
    import asyncio

__all__ = [
    "AUTH_HEADER",
    "CODES",
    "ERROR_CLASS",
    "LEASE_BATCHES",
    "LEASE_BATCH_LIMIT",
    "LEAVES",
    "SERVER_OPTIONS",
    "abort",
    "aio_channel",
    "channel",
    "from_code",
    "from_rpc_error",
    "from_status",
    "metadata",
    "queued_for_batch",
    "server_credentials",
    "status_of",
    "takes_lease_batches",
    "target",
]

log = logging.getLogger(__name__)

#: RadiumError kind <-> gRPC status code: the only place this mapping is written down.
CODES: Mapping[str, grpc.StatusCode] = {
    Kind.INVALID_ARGUMENT: grpc.StatusCode.INVALID_ARGUMENT,
    Kind.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    Kind.ALREADY_EXISTS: grpc.StatusCode.ALREADY_EXISTS,
    Kind.FAILED_PRECONDITION: grpc.StatusCode.FAILED_PRECONDITION,
    Kind.PERMISSION_DENIED: grpc.StatusCode.PERMISSION_DENIED,
    Kind.UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
    Kind.RESOURCE_EXHAUSTED: grpc.StatusCode.RESOURCE_EXHAUSTED,
    Kind.UNAUTHENTICATED: grpc.StatusCode.UNAUTHENTICATED,
    Kind.DEADLINE_EXCEEDED: grpc.StatusCode.DEADLINE_EXCEEDED,
    Kind.INTERNAL: grpc.StatusCode.INTERNAL,
}
#: The leaf a client raises for each status code: the kind's (errors.KIND_TO_CLASS).
LEAVES: Mapping[grpc.StatusCode, type[RadiumError]] = {
    **{CODES[kind]: leaf for kind, leaf in errors.KIND_TO_CLASS.items()},
    # A server that stops (a pool replica deposed: it stops at once) cancels its calls.
    grpc.StatusCode.CANCELLED: errors.UnavailableError,
}
_KINDS: Mapping[grpc.StatusCode, str] = {code: kind for kind, code in CODES.items()}
_HINTS: Mapping[grpc.StatusCode, str] = {
    grpc.StatusCode.UNAVAILABLE: "is the service running and the address right?",
    grpc.StatusCode.UNAUTHENTICATED: "check the token in the Radium config",
    grpc.StatusCode.DEADLINE_EXCEEDED: "the service is overloaded or stuck; try again",
    grpc.StatusCode.CANCELLED: "try again; a lease it may have granted meanwhile ends with its TTL",
}

AUTH_HEADER = "authorization"
#: Lease-stream metadata: the client takes batched replies; the pool's answer: it takes batched
#: calls (docs/lease-stream.md, "Batches").
LEASE_BATCHES = ("radium-lease-batches", "1")
#: Most calls or replies in one lease-stream message.
LEASE_BATCH_LIMIT = 256
_CHANNEL_OPTIONS = [
    # While a call is open, ping every second and give the connection up after a second with
    # no answer: a pool replica cut off by the network sends no reset, and without pings a
    # call to it would hang until its deadline before the client tried the next address.
    ("grpc.keepalive_time_ms", 1_000),
    ("grpc.keepalive_timeout_ms", 1_000),
    ("grpc.max_receive_message_length", 16 << 20),
    # Reconnect within 0.25 s of a pool replica taking over (gRPC's default waits up to 2 min).
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 250),
]
#: A server's side of the clients' keepalive: their pings every second are welcome (gRPC's
#: default answers pings more often than every 5 minutes, on a quiet call, with GOAWAY).
SERVER_OPTIONS = [
    ("grpc.http2.min_recv_ping_interval_without_data_ms", 500),
    ("grpc.http2.max_ping_strikes", 0),
    # gRPC's default (SO_REUSEPORT) let a second pool listen on a taken address beside the
    # first, the kernel splitting the calls between them: it must fail to start instead.
    ("grpc.so_reuseport", 0),
]
#: What a failed TLS handshake looks like in a gRPC status (wrong CA, expired, not a pool).
_TLS_FAILURE = ("andshake failed", "CERTIFICATE_VERIFY_FAILED", "SSL_ERROR")
_CLOSED = "Socket closed"


def status_of(error: RadiumError) -> tuple[grpc.StatusCode, str]:
    """The status a call that failed with ``error`` ends with: its code and one line."""
    return CODES.get(error.kind, grpc.StatusCode.INTERNAL), error.one_line()


#: Trailing metadata of a call a RadiumError ended: its leaf's name, so the client raises that
#: very leaf (``QuotaError``, not only its code's ``CapacityError``).
ERROR_CLASS = "radium-error-class"


async def abort(context: Any, error: RadiumError) -> NoReturn:
    """End the call with the error's status and its leaf's name (the call's trailing metadata)."""
    trailing = ((ERROR_CLASS, type(error).__name__),)
    await context.abort(*status_of(error), trailing_metadata=trailing)
    raise AssertionError("unreachable: abort raises")


#: gRPC status codes by their number, as a lease stream's CallError carries them.
_BY_NUMBER: Mapping[int, grpc.StatusCode] = {code.value[0]: code for code in grpc.StatusCode}


def from_status(number: int, details: str, service: str) -> RadiumError:
    """A RadiumError for a call that ended with status code ``number`` inside a stream
    (docs/lease-stream.md): the leaf and hint a unary call's status gives."""
    return from_code(_BY_NUMBER.get(number, grpc.StatusCode.UNKNOWN), details, service)


def from_rpc_error(exc: grpc.RpcError, service: str, tls: bool = False) -> RadiumError:
    """A RadiumError for a failed call (use as ``raise from_rpc_error(e, ...) from e``);
    ``tls``: the call went over TLS and the server had not answered it yet. grpc says "Socket
    closed" both for a handshake that refused our certificate and for a server that went away
    later: a caller whose call (or session) the server had accepted passes False."""
    # grpc.RpcError subclasses (sync and aio) carry code() and details(); the base class does not.
    code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
    details = (exc.details() if hasattr(exc, "details") else None) or str(exc)
    trailing = exc.trailing_metadata() if hasattr(exc, "trailing_metadata") else None
    name = next((str(v) for k, v in trailing or () if k == ERROR_CLASS), "")
    return from_code(code, details, service, tls, name)


def from_code(
    code: grpc.StatusCode, details: str, service: str, tls: bool = False, name: str = ""
) -> RadiumError:
    """The leaf for a call that ended with ``code``: the one the server named (``name``, its
    ERROR_CLASS) when that is a leaf of the code's kind, else the code's (LEAVES)."""
    leaf = errors.named_leaf(name, _KINDS.get(code)) or LEAVES.get(code, errors.InternalError)
    hint = _HINTS.get(code, "")
    if code == grpc.StatusCode.UNAVAILABLE:
        tls_hint = "check the tls ca, cert and key in the Radium config (radium certs issue)"
        if any(s in details for s in _TLS_FAILURE):
            return errors.AuthError(
                f"{service}: TLS handshake failed (its certificate is not from our CA, "
                "or not a pool's)",
                hint=tls_hint,
            )
        if tls and _CLOSED in details:  # the server ended the handshake: our certificate
            return errors.AuthError(
                f"{service}: refused this node's certificate (another CA's, or expired)",
                hint=tls_hint,
            )
        if _CLOSED in details:
            hint = "is the service running, and does it want TLS ([client.tls])?"
    if code == grpc.StatusCode.CANCELLED:
        details = (
            f"{service} cut the call off (it stopped, or lost its leadership, while answering)"
        )
    elif code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        details = f"{service}: {code.name.lower().replace('_', ' ')} ({details})"
    return leaf(details, hint=hint)


def queued_for_batch(queue: asyncio.Queue[Any]) -> list[Any]:
    """The messages waiting in ``queue`` now, to send after the one in hand, up to the batch
    limit; an end mark (None) stays queued, for the sender to stop at."""
    batch: list[Any] = []
    while not queue.empty() and len(batch) < LEASE_BATCH_LIMIT - 1:
        if (item := queue.get_nowait()) is None:
            queue.put_nowait(None)
            break
        batch.append(item)
    return batch


def takes_lease_batches(metadata: Iterable[tuple[str, str]] | None) -> bool:
    """Whether one end's metadata (a grpc.aio.Metadata, whose ``in`` looks at keys only, or the
    servicer's tuple) says it takes lease batches."""
    return any(tuple(item) == LEASE_BATCHES for item in metadata or ())


def metadata(token: str) -> tuple[tuple[str, str], ...]:
    """The call metadata that carries ``token`` (none for no token)."""
    return ((AUTH_HEADER, f"Bearer {token}"),) if token else ()


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise ConfigError(f"cannot read TLS file {path}: {exc.strerror}") from exc


def _client_tls(tls: TlsConfig) -> tuple[grpc.ChannelCredentials, list[tuple[str, Any]]]:
    from radium import certs  # cryptography: only for TLS (the CLI starts faster without)

    credentials = grpc.ssl_channel_credentials(
        root_certificates=_read(tls.ca),
        private_key=_read(tls.key),
        certificate_chain=_read(tls.cert),
    )
    # Whatever address it is reached at, the server must hold a pool's certificate.
    return credentials, [*_CHANNEL_OPTIONS, ("grpc.ssl_target_name_override", certs.POOL_NAME)]


def target(addresses: str) -> str:
    """The gRPC target of ``host:port`` or of a comma-separated list of them (the replicas of a
    pool). Only the leading replica listens (docs/store.md), and gRPC's pick_first policy
    connects to the first address that accepts, trying the list again when that connection
    breaks: failover happens in the channel, for every client alike."""
    parts = [part.strip() for part in addresses.split(",") if part.strip()]
    if len(parts) == 1:
        return parts[0]
    resolved: list[tuple[int, str]] = []
    for part in parts:
        host, sep, port = part.rpartition(":")
        if not sep or not port.isdigit() or not host:
            raise ConfigError(f"pool address {part!r} in {addresses!r} is not host:port")
        try:
            found = socket.getaddrinfo(host.strip("[]"), int(port), type=socket.SOCK_STREAM)
        except OSError as exc:
            raise ConfigError(f"pool address {part!r}: cannot resolve {host}: {exc}") from exc
        family, *_, sockaddr = found[0]
        ip = str(sockaddr[0])
        resolved.append((family, f"[{ip}]:{port}" if family == socket.AF_INET6 else f"{ip}:{port}"))
    families = {family for family, _ in resolved}
    if len(families) > 1:
        raise ConfigError(f"pool addresses {addresses!r} mix IPv4 and IPv6: gRPC takes one family")
    scheme = "ipv6" if socket.AF_INET6 in families else "ipv4"
    return f"{scheme}:" + ",".join(address for _, address in resolved)


def channel(address: str, tls: TlsConfig | None = None) -> grpc.Channel:
    """A blocking gRPC channel to ``address``, with mutual TLS when ``tls`` is set."""
    where = target(address)
    if tls is None or not tls.enabled:
        return grpc.insecure_channel(where, options=_CHANNEL_OPTIONS)
    credentials, options = _client_tls(tls)
    return grpc.secure_channel(where, credentials, options=options)


def aio_channel(address: str, tls: TlsConfig | None = None) -> grpc.aio.Channel:
    """An asyncio gRPC channel to ``address``, with mutual TLS when ``tls`` is set."""
    where = target(address)
    if tls is None or not tls.enabled:
        return grpc.aio.insecure_channel(where, options=_CHANNEL_OPTIONS)
    credentials, options = _client_tls(tls)
    return grpc.aio.secure_channel(where, credentials, options=options)


def server_credentials(tls: TlsConfig) -> grpc.ServerCredentials:
    """The pool's side of mutual TLS: its certificate, and client certificates required."""
    return grpc.ssl_server_credentials(
        [(_read(tls.key), _read(tls.cert))],
        root_certificates=_read(tls.ca),
        require_client_auth=True,
    )
