"""Radium's DRA driver (``radium.io``) on a node: the kubelet plugin that prepares claims by
leasing from the pool through the node agent and writing their CDI specs (docs/kubernetes.md).

Public names: :mod:`radium.dra.claims` (reading a claim's allocation), :mod:`radium.dra.cdi`
(a claim's CDI spec), :mod:`radium.dra.plugin` (the gRPC services), :mod:`radium.dra.serve`
(``radium dra serve``).
"""

__all__: list[str] = []
