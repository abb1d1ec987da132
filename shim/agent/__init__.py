"""``radium agent``, the node agent: holds this node's leases on behalf of its containers.

The hook asks it for a lease when a container starts and gives the lease back when the
container ends; the agent keeps every lease alive, writes it into the container's runtime
directory, releases it itself when the container's init process disappears, and wires the
container to its acceptor without ever showing it the lease credential. Protocol:
docs/agent-protocol.md.

- :mod:`.protocol`: the operations and the one-line JSON framing of requests and replies.
- :mod:`.book`: the lease book, what the agent holds, saved to its state file.
- :mod:`.broker`: each container's data-plane socket and the connections dialled for it.
- :mod:`.service`: the operations, keep-alive and watching, with the pool as a small interface.
- :mod:`.process`: the process: one per node, signals, metrics, wiring the parts together.

Nothing is imported here: the hook's client imports :mod:`.protocol` on every container start.
"""
