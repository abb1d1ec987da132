"""``radium setup <engine>``: write each container engine's configuration for Radium.

Like ``nvidia-ctk runtime configure``: every writer is idempotent, keeps every key it does not
own, backs up the original before its first change, and can remove what it added. Writers only
compute file changes (:class:`Change`); :mod:`radium.engines.apply` writes them.
"""
