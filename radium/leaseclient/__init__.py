"""The node agent's side of leasing: the lease calls it makes, over the pool's gRPC stream or
its lease socket, and the socket's framing (docs/lease-socket.md, docs/lease-stream.md)."""
