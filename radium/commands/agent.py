"""``radium agent``: the node agent (normally started on demand by the hook, or by its unit)."""

from __future__ import annotations

import argparse

from radium import config as config_module
from radium import logs
from radium.lifeline import follow_supervisor

__all__ = ["register"]


def _agent(args: argparse.Namespace) -> int:
    from radium.agent.process import serve

    config = config_module.load()
    logs.setup("radium agent", "", stderr_level=20)
    follow_supervisor()
    import asyncio

    asyncio.run(serve(config))
    return 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add this module's subcommands and their options to the ``radium`` command line."""
    parser = commands.add_parser("agent", help="run the node agent that holds this node's leases")
    parser.set_defaults(func=_agent)
