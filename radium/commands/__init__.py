"""Subcommands of ``radium``: each module registers its parsers with ``register(commands)``."""
