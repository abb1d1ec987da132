"""``radium pool serve`` and ``radium acceptor serve``: long-running services."""

from __future__ import annotations

import argparse
import dataclasses

from radium import config as config_module
from radium import logs
from radium.constants import WORKER_ENGINES
from radium.lifeline import follow_supervisor

__all__ = ["register"]


def _pool_serve(args: argparse.Namespace) -> int:
    from radium.pool.api import server

    config = config_module.load()
    if args.listen or args.db:
        pool = dataclasses.replace(
            config.pool, listen=args.listen or config.pool.listen, db=args.db or config.pool.db
        )
        config = dataclasses.replace(config, pool=pool)
    logs.setup("radium pool", args.log_file, stderr_level=20)
    follow_supervisor()
    import asyncio

    asyncio.run(server.serve(config))
    return 0


def _acceptor_serve(args: argparse.Namespace) -> int:
    from radium.acceptor import daemon

    settings = config_module.load().acceptor
    overrides = {
        key: value
        for key, value in (
            ("pool", args.pool),
            ("name", args.name),
            ("data_address", args.data_address),
            ("backend", args.backend),
            ("cpu_devices", args.cpu_devices),
            ("state_dir", args.state_dir),
            ("engine", args.engine),
            ("engine_address", args.engine_address),
            ("metrics", args.metrics),
        )
        if value is not None
    }
    settings = dataclasses.replace(settings, **overrides)
    logs.setup("radium acceptor", args.log_file, stderr_level=20)
    follow_supervisor()
    import asyncio

    asyncio.run(daemon.serve(settings))
    return 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add this module's subcommands and their options to the ``radium`` command line."""
    pool = commands.add_parser("pool", help="the pool service").add_subparsers(
        dest="pool_command", required=True
    )
    serve = pool.add_parser("serve", help="run the pool (gRPC) until SIGTERM")
    serve.add_argument("--listen", help="host:port (default: pool.listen)")
    serve.add_argument("--db", help="SQLite database (default: pool.db)")
    serve.add_argument("--log-file", default="", help="also log to this file")
    serve.set_defaults(func=_pool_serve)

    acceptor = commands.add_parser("acceptor", help="the acceptor service").add_subparsers(
        dest="acceptor_command", required=True
    )
    serve = acceptor.add_parser(
        "serve", help="register this GPU server's devices with the pool and serve leases"
    )
    serve.add_argument("--pool", help="pool address host:port (default: acceptor.pool)")
    serve.add_argument("--name", help="name in the pool (default: acceptor.name or the host name)")
    serve.add_argument("--data-address", help="data-plane address workers are reached at")
    serve.add_argument(
        "--backend",
        choices=("auto", "nvml", "cpu"),
        help="where devices come from: NVIDIA (nvml), CPU stand-ins (cpu), or auto",
    )
    serve.add_argument("--cpu-devices", type=int, help="devices the CPU backend exposes")
    serve.add_argument("--state-dir", help="where lease slots live")
    serve.add_argument(
        "--engine", choices=WORKER_ENGINES, help="pulls registered images, runs workers"
    )
    serve.add_argument("--engine-address", help="the engine's socket (default: its usual one)")
    serve.add_argument(
        "--metrics", help='host:port of /metrics (default: acceptor.metrics; "" for none)'
    )
    serve.add_argument("--log-file", default="", help="also log to this file")
    serve.set_defaults(func=_acceptor_serve)
