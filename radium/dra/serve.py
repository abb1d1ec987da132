"""``radium dra serve``: the kubelet plugin's two gRPC servers on their unix sockets.

kubelet's plugin watcher finds the registration socket in its ``plugins_registry`` directory,
asks it ``GetInfo`` and then calls the DRA service at the endpoint it names. Both sockets are
root's alone (0600). On SIGTERM the registration socket goes first, so that kubelet stops
sending claims before the service stops answering.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import stat
import threading
from concurrent import futures
from typing import Any

import grpc

from radium import agentclient
from radium.configtree import Config
from radium.dra.apiserver import ApiServer
from radium.dra.claims import ClaimSource
from radium.dra.paths import DRIVER, Paths
from radium.dra.plugin import DraPlugin, Leaser, Registration
from radium.errors import ConfigError, UnsafeStateDirError
from radium.proto import dra_v1_pb2_grpc as pb_grpc
from radium.proto import pluginregistration_v1_pb2_grpc as reg_grpc

__all__ = ["AgentLeaser", "api_server_from_env", "serve", "start"]

log = logging.getLogger(__name__)
SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


class AgentLeaser:
    """Claims' leases through this node's agent (``[agent]`` of the Radium config)."""

    def __init__(self, config: Config) -> None:
        if not config.agent.enabled:
            raise ConfigError(
                "agent.enabled is false: the DRA plugin leases through the node agent",
                hint="set [agent] enabled = true and [client] pool in the Radium config",
            )
        self.config = config

    def acquire(self, key: str, request: dict[str, str]) -> dict[str, Any] | None:
        return agentclient.acquire(self.config, key, 0, request, "")

    def release(self, key: str) -> None:
        agentclient.release(self.config, key)


def api_server_from_env(environ: dict[str, str]) -> ApiServer:
    """The API server as a pod sees it (its service account's token and CA)."""
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise ConfigError(
            "no API server: KUBERNETES_SERVICE_HOST and _PORT are not set",
            hint="run the plugin in a pod, or pass --api-server URL",
        )
    host = f"[{host}]" if ":" in host else host
    return ApiServer(
        f"https://{host}:{port}", f"{SERVICE_ACCOUNT}/token", f"{SERVICE_ACCOUNT}/ca.crt"
    )


def _listen(server: grpc.Server, path: str) -> None:
    """Bind ``path`` for root alone, replacing a stale socket (never following a link)."""
    with contextlib.suppress(FileNotFoundError):
        if not stat.S_ISSOCK(os.lstat(path).st_mode):
            raise UnsafeStateDirError(f"{path} exists and is not a socket: refusing to replace it")
        os.unlink(path)
    old = os.umask(0o177)
    try:
        server.add_insecure_port(f"unix:{path}")
    finally:
        os.umask(old)


def start(source: ClaimSource, leaser: Leaser, paths: Paths) -> tuple[grpc.Server, grpc.Server]:
    """Both servers, started: (DRA service, registration)."""
    os.makedirs(paths.plugin_dir, mode=0o700, exist_ok=True)
    os.makedirs(paths.registry_dir, mode=0o700, exist_ok=True)
    plugin = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_DRAPluginServicer_to_server(DraPlugin(source, leaser, paths.cdi_dir), plugin)
    _listen(plugin, paths.endpoint)
    plugin.start()
    try:
        registration = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
        reg_grpc.add_RegistrationServicer_to_server(Registration(paths.endpoint), registration)
        _listen(registration, paths.registration)
        registration.start()
    except BaseException:
        plugin.stop(grace=None).wait()
        raise
    log.info("%s DRA plugin at %s, registration at %s", DRIVER, paths.endpoint,
             paths.registration)  # fmt: skip
    return plugin, registration


def serve(source: ClaimSource, leaser: Leaser, paths: Paths) -> None:
    """Serve until SIGTERM or SIGINT."""
    stopping = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopping.set())
    plugin, registration = start(source, leaser, paths)
    try:
        stopping.wait()
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(paths.registration)
        registration.stop(grace=1).wait()
        plugin.stop(grace=5).wait()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(paths.endpoint)
