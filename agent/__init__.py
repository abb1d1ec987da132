"""``radium agent``, the node agent: holds this node's leases on behalf of its containers.

The hook asks it for a lease when a container starts and gives the lease back when the
container ends; the agent keeps every lease alive, writes it into the container's runtime
directory, releases it itself when the container's init process disappears, and wires the
container to its acceptor without ever showing it the lease credential. Protocol:
docs/agent-protocol.md.

- :mod:`radium.agentprotocol` (beside its clients, :mod:`radium.agentclient` and the
  ``radium-agent-call`` fronts): the operations and the one-line JSON framing.
- :mod:`.book`: the lease book, what the agent holds, saved to its state file.
- :mod:`.broker`: each container's data-plane socket and the connections dialled for it.
- :mod:`.service`: the operations, keep-alive and watching, with the pool as a small interface.
- :mod:`.starts`: the start socket, a container's create, prestart, poststop and delete.
- :mod:`.mounthelper`: the process that joins containers' mount namespaces for the agent.
- :mod:`.process`: the process: one per node, signals, metrics, wiring the parts together.
- :mod:`.metrics`: its /metrics.

Nothing is imported here. It is a package of its own, not a shim: the hook and the wrappers
reach it only through its protocol (tests/test_layers.py keeps that so).
"""
