"""The driver's API server client (radium.dra.apiserver) against a local HTTP server that
answers what each test sets: every refusal is the error a caller can act on, naming the object."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from radium.dra import apiserver
from radium.errors import AlreadyExistsError, AuthError, SpecError, UnavailableError
from tests.ports import free_port


class Server(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.status, self.body = 200, b"{}"
        self.seen: list[tuple[str, str, str, bytes]] = []


class Handler(BaseHTTPRequestHandler):
    server: Server

    def _any(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        auth = self.headers.get("Authorization", "")
        self.server.seen.append((self.command, self.path, auth, self.rfile.read(length)))
        self.send_response(self.server.status)
        self.send_header("Content-Length", str(len(self.server.body)))
        self.end_headers()
        self.wfile.write(self.server.body)

    do_GET = do_POST = do_PUT = do_DELETE = _any

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    threading.Thread(target=s.serve_forever, daemon=True).start()
    yield s
    s.shutdown()
    s.server_close()


def client(server: Server, tmp_path: Path) -> apiserver.ApiServer:
    token = tmp_path / "token"
    token.write_text("sekrit\n")
    return apiserver.ApiServer(f"http://127.0.0.1:{server.server_port}/", str(token))


def test_a_call_sends_its_body_and_token_and_returns_the_object(
    server: Server, tmp_path: Path
) -> None:
    server.body = b'{"kind": "ResourceSlice"}'
    path = "/apis/x/" + apiserver.quoted("a/b", "c d")
    answer = client(server, tmp_path).call("PUT", path, "slice a", {"spec": {}})
    assert answer == {"kind": "ResourceSlice"}
    assert server.seen == [("PUT", "/apis/x/a%2Fb/c%20d", "Bearer sekrit", b'{"spec": {}}')]


@pytest.mark.parametrize(
    ("status", "error", "text"),
    [
        (401, AuthError, "the API server refused replacing slice a (401)"),
        (403, AuthError, "the API server refused replacing slice a (403)"),
        (404, SpecError, "slice a does not exist in the API server"),
        (409, AlreadyExistsError, "replacing slice a: it changed or exists already (409)"),
        (500, UnavailableError, "replacing slice a: the API server answered 500"),
    ],
)
def test_each_refusal_is_the_error_a_caller_can_act_on(
    server: Server, tmp_path: Path, status: int, error: type[Exception], text: str
) -> None:
    server.status = status
    with pytest.raises(error) as caught:
        client(server, tmp_path).call("PUT", "/x", "slice a", {})
    assert str(caught.value.args[0]) == text


@pytest.mark.parametrize("body", [b"not json", b"[1, 2]", b""])
def test_garbage_is_unavailable_not_a_traceback(
    server: Server, tmp_path: Path, body: bytes
) -> None:
    server.body = body
    with pytest.raises(UnavailableError, match="reading claim x: the API server answered garbage"):
        client(server, tmp_path).call("GET", "/x", "claim x")


def test_a_reply_over_the_cap_is_refused(server: Server, tmp_path: Path) -> None:
    server.body = json.dumps({"pad": "x" * apiserver.MAX_REPLY_BYTES}).encode()
    with pytest.raises(SpecError, match="claim x is larger than"):
        client(server, tmp_path).call("GET", "/x", "claim x")


def test_an_unreachable_server_is_unavailable_naming_it() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(UnavailableError, match=f"deleting slice a: {url} unreachable"):
        apiserver.ApiServer(url).call("DELETE", "/x", "slice a")
