"""The Kubernetes API server, as the driver reaches it: a pod's service account (bearer token,
the cluster's CA) or ``--api-server/--token-file/--ca-file``. Every call has a deadline and a
size cap, and each failure is the error a caller can act on, naming what was asked.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from radium.errors import (
    AlreadyExistsError,
    AuthError,
    SpecError,
    UnavailableError,
)

__all__ = ["MAX_REPLY_BYTES", "READ_TIMEOUT", "ApiServer", "quoted"]

#: Seconds for one call: the plugin answers kubelet within its own deadline.
READ_TIMEOUT = 10.0
#: A reply larger than this is refused (a claim or a pool's slices are a few KiB each).
MAX_REPLY_BYTES = 1 << 20


def quoted(*parts: str) -> str:
    """``parts`` joined as path segments, each quoted whole (a name holds no ``/``)."""
    return "/".join(urllib.parse.quote(p, safe="") for p in parts)


class ApiServer:
    """One API server: ``call`` a path with a method and a JSON body, get its JSON object."""

    def __init__(self, url: str, token_file: str = "", ca_file: str = "") -> None:
        self.url = url.rstrip("/")
        self.token_file = token_file
        self.context = ssl.create_default_context(cafile=ca_file or None)

    def call(
        self, method: str, path: str, what: str, body: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """The reply to ``method path`` as a JSON object. ``what`` names the object in errors:
        404 is a ``SpecError``, 409 ``AlreadyExistsError``, 401/403 ``AuthError``, anything
        else the server or the network did ``UnavailableError``."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.token_file:
            with open(self.token_file, encoding="utf-8") as f:
                request.add_header("Authorization", f"Bearer {f.read().strip()}")
        try:
            with urllib.request.urlopen(
                request, timeout=READ_TIMEOUT, context=self.context
            ) as reply:
                raw = reply.read(MAX_REPLY_BYTES + 1)
        except urllib.error.HTTPError as exc:
            raise _refusal(exc.code, method, what) from exc
        except (OSError, urllib.error.URLError) as exc:
            raise UnavailableError(
                f"{_verb(method)} {what}: {self.url} unreachable ({exc})"
            ) from exc
        if len(raw) > MAX_REPLY_BYTES:
            raise SpecError(f"{what} is larger than {MAX_REPLY_BYTES} bytes")
        try:
            answer = json.loads(raw)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise UnavailableError(f"{_verb(method)} {what}: the API server answered garbage")
        return answer


def _verb(method: str) -> str:
    return {"GET": "reading", "POST": "creating", "PUT": "replacing", "DELETE": "deleting"}.get(
        method, method
    )


def _refusal(code: int, method: str, what: str) -> Exception:
    if code in (401, 403):
        return AuthError(f"the API server refused {_verb(method)} {what} ({code})")
    if code == 404:
        return SpecError(f"{what} does not exist in the API server")
    if code == 409:
        return AlreadyExistsError(f"{_verb(method)} {what}: it changed or exists already (409)")
    return UnavailableError(f"{_verb(method)} {what}: the API server answered {code}")
