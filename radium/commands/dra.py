"""``radium dra serve``: the DRA kubelet plugin of the ``radium.io`` driver; ``radium dra slices``:
the pool's devices as its ResourceSlices (docs/kubernetes.md)."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from radium import config as config_module
from radium import logs
from radium.lifeline import follow_supervisor

if TYPE_CHECKING:
    from radium.dra.apiserver import ApiServer
    from radium.dra.slices import PoolDevice

__all__ = ["register"]


def _serve(args: argparse.Namespace) -> int:
    from radium.dra import claims, serve
    from radium.dra.paths import Paths

    config = config_module.load()
    logs.setup("radium dra", "", stderr_level=20)
    leaser = serve.AgentLeaser(config)
    source = claims.ApiClaims(_api_server(args))
    paths = Paths(args.plugin_dir, args.registry_dir, args.cdi_dir)
    follow_supervisor()
    serve.serve(source, leaser, paths)
    return 0


def _api_server(args: argparse.Namespace) -> ApiServer:
    """The API server named by the options, else the pod's own."""
    from radium.dra import apiserver, serve

    if args.api_server:
        return apiserver.ApiServer(args.api_server, args.token_file, args.ca_file)
    return serve.api_server_from_env(dict(os.environ))


def _devices() -> list[PoolDevice]:
    """The pool's serving devices, as its status reports them."""
    from radium.commands.inspect import pool_client
    from radium.dra.slices import PoolDevice

    status = pool_client().status()
    return [
        PoolDevice(d.acceptor, d.device.id, d.device.vendor, d.device.model, d.device.memory_mib)
        for d in status.devices
        if d.up
    ]


def _slices(args: argparse.Namespace) -> int:
    import json
    import time

    from radium.dra import publish, slices

    if not args.publish:
        # A pool's generation must grow with each change published: the clock's seconds do.
        generation = args.generation or int(time.time())
        items = slices.slices(_devices(), args.pool, generation)
        print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=2))
        return 0
    logs.setup("radium dra", "", stderr_level=20)
    store = publish.ApiSlices(_api_server(args))

    def round_() -> publish.Published:
        return publish.publish(store, _devices(), args.pool)

    if args.every <= 0:
        round_()
        return 0
    follow_supervisor()
    publish.every(args.every, round_, time.sleep)
    return 0


def _api_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--api-server", default="", help="its URL; default: the pod's (KUBERNETES_SERVICE_*)"
    )
    parser.add_argument("--token-file", default="", help="bearer token for --api-server")
    parser.add_argument("--ca-file", default="", help="CA bundle for --api-server")


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add this module's subcommands and their options to the ``radium`` command line."""
    from radium.dra.paths import Paths

    parser = commands.add_parser("dra", help="Kubernetes DRA: the radium.io driver on a node")
    subs = parser.add_subparsers(dest="dra_command", required=True, metavar="COMMAND")
    serve = subs.add_parser(
        "serve", help="run the kubelet plugin that prepares claims (leases, CDI specs)"
    )
    defaults = Paths()
    serve.add_argument("--plugin-dir", default=defaults.plugin_dir, help="its DRA socket's dir")
    serve.add_argument(
        "--registry-dir", default=defaults.registry_dir, help="kubelet's plugins_registry"
    )
    serve.add_argument("--cdi-dir", default=defaults.cdi_dir, help="where CDI specs go")
    _api_options(serve)
    serve.set_defaults(func=_serve)
    published = subs.add_parser(
        "slices",
        help="the pool's devices as ResourceSlices: printed (for kubectl apply), or published",
    )
    published.add_argument("--pool", default="radium", help="the DRA pool's name")
    published.add_argument(
        "--generation", type=int, default=0, help="printed: the generation (default: now, in s)"
    )
    published.add_argument(
        "--publish", action="store_true", help="write them to the API server, not stdout"
    )
    published.add_argument(
        "--every", type=float, default=0, help="with --publish: again every this many seconds"
    )
    _api_options(published)
    published.set_defaults(func=_slices)
