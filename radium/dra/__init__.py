"""Radium's DRA driver (``radium.io``) on a node: the kubelet plugin that prepares claims by
leasing from the pool through the node agent and writing their CDI specs (docs/kubernetes.md).

Public names: :mod:`radium.dra.claims` (reading a claim's allocation), :mod:`radium.dra.capacity`
(a share asked as consumable memory), :mod:`radium.dra.cdi` (a claim's CDI spec),
:mod:`radium.dra.plugin` (the gRPC services), :mod:`radium.dra.serve` (``radium dra serve``),
:mod:`radium.dra.slices` (the pool's devices as ResourceSlices, ``radium dra slices``).
"""

__all__: list[str] = []
