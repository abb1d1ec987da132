"""``scripts/gpu-check``: prove the remote half on a real NVIDIA GPU in one command.

``--prepare`` (on a machine with a package registry) fills ``.gpu-check/`` with what the GPU
machine lacks; the check itself (on the GPU machine, as root, with that folder carried) starts a
pool, an NVIDIA acceptor and a node agent, runs torch work remoted from a Python without torch,
compares it with the same work run locally, and prints one table. ``--dry-run`` does the same on
the CPU backend, here. Modules: :mod:`.table` (the rows), :mod:`.prepare`, :mod:`.install`,
:mod:`.services`, :mod:`.runs`, :mod:`.checks`, :mod:`.main`; ``workload.py`` is the torch
program run both ways.
"""
