"""Stand-ins for what cannot run here, for the DRA plugin's tests and benchmark: an API server
serving ResourceClaims (kube-apiserver), and the plugin's node with kubelet's calls
(:mod:`tests.dra.kubelet`); the plugin itself is the real `radium dra serve` process."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import threading
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


class ApiServer(ThreadingHTTPServer):
    """ResourceClaims by namespace/name, for the bearer token only."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.claims: dict[str, dict[str, Any]] = {}

    def add(self, **kwargs: Any) -> Claim:
        claim, obj = resource_claim(**kwargs)
        self.claims[f"/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/{claim.name}"] = (
            obj
        )
        return claim


class _Handler(BaseHTTPRequestHandler):
    server: ApiServer

    def do_GET(self) -> None:
        obj = self.server.claims.get(self.path)
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            status, body = 401, {"kind": "Status", "code": 401}
        elif obj is None:
            status, body = 404, {"kind": "Status", "code": 404}
        else:
            status, body = 200, obj
        data = json.dumps(body).encode()
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
