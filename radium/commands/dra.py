"""``radium dra serve``: the DRA kubelet plugin of the ``radium.io`` driver; ``radium dra slices``:
the pool's devices as its ResourceSlices (docs/kubernetes.md)."""

from __future__ import annotations

import argparse
import os

from radium import config as config_module
from radium import logs
from radium.lifeline import follow_supervisor

__all__ = ["register"]


def _serve(args: argparse.Namespace) -> int:
    from radium.dra import claims, serve
    from radium.dra.paths import Paths

    config = config_module.load()
    logs.setup("radium dra", "", stderr_level=20)
    leaser = serve.AgentLeaser(config)
    if args.api_server:
        source = claims.ApiServer(args.api_server, args.token_file, args.ca_file)
    else:
        source = serve.api_server_from_env(dict(os.environ))
    paths = Paths(args.plugin_dir, args.registry_dir, args.cdi_dir)
    follow_supervisor()
    serve.serve(source, leaser, paths)
    return 0


def _slices(args: argparse.Namespace) -> int:
    import json
    import time

    from radium.commands.inspect import pool_client
    from radium.dra import slices

    status = pool_client().status()
    devices = [
        slices.PoolDevice(
            d.acceptor, d.device.id, d.device.vendor, d.device.model, d.device.memory_mib
        )
        for d in status.devices
        if d.up
    ]
    # A pool's generation must grow with each change it publishes: the clock's seconds do.
    generation = args.generation or int(time.time())
    items = slices.slices(devices, args.pool, generation)
    print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=2))
    return 0


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
    serve.add_argument(
        "--api-server", default="", help="its URL; default: the pod's (KUBERNETES_SERVICE_*)"
    )
    serve.add_argument("--token-file", default="", help="bearer token for --api-server")
    serve.add_argument("--ca-file", default="", help="CA bundle for --api-server")
    serve.set_defaults(func=_serve)
    published = subs.add_parser(
        "slices",
        help="print the pool's devices as ResourceSlices (for kubectl apply -f -)",
    )
    published.add_argument("--pool", default="radium", help="the DRA pool's name")
    published.add_argument(
        "--generation", type=int, default=0, help="the pool's generation (default: now, in s)"
    )
    published.set_defaults(func=_slices)
