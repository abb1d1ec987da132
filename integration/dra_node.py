"""Stand-ins for what cannot run here, for the DRA plugin's tests and benchmark: an API server
serving ResourceClaims and keeping ResourceSlices (kube-apiserver), and the plugin's node with
kubelet's calls (:mod:`tests.dra.kubelet`); the plugin itself is the real `radium dra serve`
process."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import socket
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from integration.pool import Service, wait_until
from integration.test_leases import stop_agent
from radium.dra.claims import Claim
from tests.dra.claimdata import resource_claim
from tests.dra.kubelet import Kubelet

RADIUM = str(Path(sys.executable).with_name("radium"))
TOKEN = "service-account-token"
NODE = "dranode"


SLICES = "/apis/resource.k8s.io/v1/resourceslices"


class ApiServer(ThreadingHTTPServer):
    """ResourceClaims by namespace/name (read), ResourceSlices by name (listed by label,
    created, replaced at their resource version, deleted), for the bearer token only."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.claims: dict[str, dict[str, Any]] = {}
        self.slices: dict[str, dict[str, Any]] = {}
        self.versions = itertools.count(1)
        self.lock = threading.Lock()

    def add(self, **kwargs: Any) -> Claim:
        claim, obj = resource_claim(**kwargs)
        self.claims[f"/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/{claim.name}"] = (
            obj
        )
        return claim


class _Handler(BaseHTTPRequestHandler):
    server: ApiServer

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        if url.path == SLICES:
            selector = urllib.parse.parse_qs(url.query).get("labelSelector", [""])[0]
            key, _, value = selector.partition("=")
            with self.server.lock:
                items = [o for o in self.server.slices.values()
                         if o["metadata"].get("labels", {}).get(key) == value]  # fmt: skip
            self._answer(200, {"kind": "ResourceSliceList", "items": items})
        else:
            obj = self.server.claims.get(self.path)
            self._answer(404, None) if obj is None else self._answer(200, obj)

    def do_POST(self) -> None:
        obj = self._body()
        with self.server.lock:
            if self.path != SLICES or obj["metadata"]["name"] in self.server.slices:
                return self._answer(409 if self.path == SLICES else 404, None)
            self._answer(201, self._keep(obj))

    def do_PUT(self) -> None:
        obj, name = self._body(), self.path.removeprefix(SLICES + "/")
        with self.server.lock:
            current = self.server.slices.get(name)
            if current is None or name != obj["metadata"]["name"]:
                return self._answer(404, None)
            if obj["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
                return self._answer(409, None)
            self._answer(200, self._keep(obj))

    def do_DELETE(self) -> None:
        with self.server.lock:
            gone = self.server.slices.pop(self.path.removeprefix(SLICES + "/"), None)
        self._answer(404, None) if gone is None else self._answer(200, gone)

    def _keep(self, obj: dict[str, Any]) -> dict[str, Any]:
        obj["metadata"]["resourceVersion"] = str(next(self.server.versions))
        self.server.slices[obj["metadata"]["name"]] = obj
        return obj

    def _body(self) -> dict[str, Any]:
        body: dict[str, Any] = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        return body

    def _answer(self, status: int, body: dict[str, Any] | None) -> None:
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            status, body = 401, None
        data = json.dumps(body or {"kind": "Status", "code": status}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@dataclass
class Node:
    root: Path
    config: Path
    api: ApiServer
    kubelet: Kubelet

    def __post_init__(self) -> None:
        token = self.root / "token"
        token.write_text(TOKEN + "\n")
        self.plugin = Service(
            [RADIUM, "dra", "serve", "--plugin-dir", str(self.root / "plugins" / "radium.io"),
             "--registry-dir", str(self.root / "registry"), "--cdi-dir", str(self.cdi_dir),
             "--api-server", f"http://127.0.0.1:{self.api.server_port}",
             "--token-file", str(token)],
            {"PATH": os.environ["PATH"], "RADIUM_CONFIG": str(self.config)},
            self.root / "plugin.log",
        )  # fmt: skip

    @property
    def cdi_dir(self) -> Path:
        return self.root / "cdi"

    def start_plugin(self) -> None:
        self.plugin.start()
        wait_until(self.listening, 30, "the plugin's registration socket")

    def listening(self) -> bool:
        """Whether the registration socket takes connections (a killed plugin's stays)."""
        with socket.socket(socket.AF_UNIX) as probe:
            return probe.connect_ex(str(self.kubelet.registration)) == 0

    def stop_plugin(self, signum: int = signal.SIGTERM) -> None:
        self.plugin.kill(signum)


@contextlib.contextmanager
def dra_node(root: Path, config: Path) -> Iterator[Node]:
    """The plugin running as `radium dra serve` for the Radium ``config`` (its node agent),
    registered with the kubelet stand-in, an API server stand-in serving its claims; all
    stopped on the way out (the agent too)."""
    api = ApiServer()
    threading.Thread(target=api.serve_forever, daemon=True).start()
    node = Node(root, config, api, Kubelet(root / "registry" / "radium.io-reg.sock"))
    try:
        node.start_plugin()
        node.kubelet.register()
        yield node
    finally:
        node.stop_plugin()
        api.shutdown()
        api.server_close()
        stop_agent(config)
