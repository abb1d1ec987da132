"""etcd's key-value API as the pool uses it: ranges, transactions and leases, over any of
several endpoints.

The client is etcd3gw (etcd's gRPC gateway: JSON over HTTP/1.1) because it is synchronous,
like the pool's write-through store (a change is stored before the pool answers, on the pool's
one thread), and speaks TLS with client certificates; aetcd (asyncio over gRPC) only opens
insecure channels. Every foreign error becomes :class:`StoreUnavailableError`: nothing changed.
"""

from __future__ import annotations

import base64
import logging
import urllib.parse
from dataclasses import dataclass
from typing import Any, Callable, Sequence, TypeVar

import etcd3gw
from etcd3gw import exceptions as etcd_errors

from radium.errors import ConfigError, StoreUnavailableError

__all__ = [
    "HINT",
    "MAX_TXN_OPS",
    "RANGE_PAGE",
    "EtcdKV",
    "KeyValue",
    "absent",
    "created_at",
    "delete",
    "encode",
    "put",
]

log = logging.getLogger(__name__)
T = TypeVar("T")
#: etcd's own limit on operations per transaction (--max-txn-ops).
MAX_TXN_OPS = 128
#: Keys one range request reads at most: a larger read comes in pages, each parsed apart, so
#: no one answer holds the interpreter long (the ended log is read beside the serving loop).
RANGE_PAGE = 1000
HINT = "check [pool.etcd] endpoints and that a majority of the etcd members runs"


def encode(text: str | bytes) -> str:
    """A key or value as etcd's JSON gateway takes it (base64)."""
    raw = text.encode() if isinstance(text, str) else text
    return base64.b64encode(raw).decode()


@dataclass(frozen=True)
class KeyValue:
    """One key as etcd returns it, with its revisions."""

    key: str
    value: bytes
    create_revision: int
    mod_revision: int


def put(key: str, value: str, lease: int = 0) -> dict[str, Any]:
    """A transaction's put of ``key`` (attached to the etcd lease ``lease``, if any)."""
    request: dict[str, Any] = {"key": encode(key), "value": encode(value)}
    if lease:
        request["lease"] = str(lease)
    return {"request_put": request}


def delete(key: str) -> dict[str, Any]:
    """A transaction's delete of ``key``."""
    return {"request_delete_range": {"key": encode(key)}}


def absent(key: str) -> dict[str, Any]:
    """A transaction's condition that ``key`` does not exist."""
    return {"key": encode(key), "result": "EQUAL", "target": "VERSION", "version": "0"}


def created_at(key: str, revision: int) -> dict[str, Any]:
    """True while ``key`` is the one created at ``revision`` (not deleted and made again)."""
    return {
        "key": encode(key),
        "result": "EQUAL",
        "target": "CREATE",
        "create_revision": str(revision),
    }


def _client(endpoint: str, timeout: float, ca: str, cert: str, key: str) -> etcd3gw.Etcd3Client:
    url = urllib.parse.urlsplit(endpoint if "://" in endpoint else f"http://{endpoint}")
    if url.scheme not in ("http", "https") or not url.hostname or not url.port:
        raise ConfigError(
            f"config key pool.etcd.endpoints: {endpoint!r} is not http(s)://host:port"
        )
    client = etcd3gw.Etcd3Client(
        host=url.hostname,
        port=url.port,
        protocol=url.scheme,
        ca_cert=ca or None,
        cert_key=key or None,
        cert_cert=cert or None,
        timeout=timeout,
        api_path="/v3/",  # etcd >= 3.4; no discovery round trip
    )
    # Not the environment's proxies, netrc or CA bundle: etcd is reached directly, with the
    # [pool.etcd] certificates, and requests scanned the whole environment for them on every
    # call: a quarter of each transaction's CPU (1.2 -> 0.9 ms in a loop against one etcd).
    client.session.trust_env = False
    return client


class EtcdKV:
    """One etcd cluster through its endpoints: a call goes to the one that last answered and
    moves on when it refuses the connection. A timeout is not retried elsewhere: with no
    quorum every member times out, and the caller must hear it fast."""

    def __init__(
        self,
        endpoints: Sequence[str],
        *,
        timeout: float = 2.0,
        ca: str = "",
        cert: str = "",
        key: str = "",
        page: int = RANGE_PAGE,
    ) -> None:
        if not endpoints:
            raise ConfigError("config key pool.etcd.endpoints must list at least one endpoint")
        self.endpoints = tuple(endpoints)
        self.timeout = timeout
        self.page = page
        self._clients = [_client(e, timeout, ca, cert, key) for e in endpoints]
        self._current = 0

    def _call(self, what: str, call: Callable[[etcd3gw.Etcd3Client], T]) -> T:
        last: Exception | None = None
        for step in range(len(self._clients)):
            index = (self._current + step) % len(self._clients)
            try:
                result = call(self._clients[index])
            except etcd_errors.ConnectionFailedError as exc:
                last = exc
                continue
            except etcd_errors.ConnectionTimeoutError as exc:
                raise StoreUnavailableError(
                    f"etcd {what} got no answer from {self.endpoints[index]} within"
                    f" {self.timeout:g}s (no quorum?)",
                    hint=HINT,
                ) from exc
            except (etcd_errors.Etcd3Exception, ValueError, KeyError) as exc:
                detail = getattr(exc, "detail_text", "") or str(exc) or type(exc).__name__
                raise StoreUnavailableError(
                    f"etcd {what} failed at {self.endpoints[index]}: {_short(detail)}",
                    hint=HINT,
                ) from exc
            self._current = index
            return result
        raise StoreUnavailableError(
            f"etcd {what} failed: no endpoint of {', '.join(self.endpoints)} answered"
            f" ({_short(str(last))})",
            hint=HINT,
        ) from last

    def txn(self, compare: list[dict[str, Any]], success: list[dict[str, Any]]) -> int:
        """Apply ``success`` if every comparison holds: the revision it made, or 0 if not."""

        def call(client: etcd3gw.Etcd3Client) -> int:
            answer = client.transaction({"compare": compare, "success": success})
            return int(answer["header"]["revision"]) if answer.get("succeeded") else 0

        return self._call("transaction", call)

    def range(self, prefix: str) -> list[KeyValue]:
        """Every key under ``prefix``, in key order: at one revision, in pages of ``page``
        keys."""
        start, end = prefix.encode(), _prefix_end(prefix.encode())

        def call(client: etcd3gw.Etcd3Client) -> list[KeyValue]:
            found: list[KeyValue] = []
            request = {"key": encode(start), "range_end": encode(end), "limit": self.page}
            while True:
                answer = client.post(client.get_url("/kv/range"), json=request)
                request.setdefault("revision", answer["header"]["revision"])
                kvs = answer.get("kvs", [])
                found.extend(
                    KeyValue(
                        base64.b64decode(kv["key"]).decode(),
                        base64.b64decode(kv.get("value", "")),
                        int(kv["create_revision"]),
                        int(kv["mod_revision"]),
                    )
                    for kv in kvs
                )
                if not answer.get("more") or not kvs:
                    return found
                request["key"] = encode(base64.b64decode(kvs[-1]["key"]) + b"\0")

        return self._call("range", call)

    def revision(self, key: str) -> int:
        """The store's current revision (read at ``key``, which a role may be limited to)."""

        def call(client: etcd3gw.Etcd3Client) -> int:
            request = {"key": encode(key), "count_only": True}
            return int(client.post(client.get_url("/kv/range"), json=request)["header"]["revision"])

        return self._call("range", call)

    def compact(self, revision: int) -> None:
        """Drop the history before ``revision`` (keys keep their values); nothing if it was
        compacted further already (by another replica, or etcd's own auto-compaction)."""

        def call(client: etcd3gw.Etcd3Client) -> None:
            try:
                client.post(client.get_url("/kv/compaction"), json={"revision": str(revision)})
            except etcd_errors.Etcd3Exception as exc:
                if "compacted" not in (getattr(exc, "detail_text", "") or str(exc)):
                    raise

        self._call("compaction", call)

    def grant(self, ttl: int) -> int:
        def call(client: etcd3gw.Etcd3Client) -> int:
            return int(client.lease(ttl).id)

        return self._call("lease grant", call)

    def keep_alive(self, lease: int) -> int:
        """The lease's new time to live in seconds; 0 once it has expired."""
        return max(0, self._call("lease keep-alive", lambda c: etcd3gw.Lease(lease, c).refresh()))

    def revoke(self, lease: int) -> None:
        self._call("lease revoke", lambda c: etcd3gw.Lease(lease, c).revoke())

    def close(self) -> None:
        for client in self._clients:
            client.session.close()


def _prefix_end(prefix: bytes) -> bytes:
    """The first key past every key that starts with ``prefix`` (etcd's range_end)."""
    stem = prefix.rstrip(b"\xff")
    return stem[:-1] + bytes([stem[-1] + 1]) if stem else b"\0"


def _short(text: str) -> str:
    return " ".join(text.split())[:200]
