"""Lease operations over the dispatcher (allocate, keep alive, release) and their carriers: the
gRPC ``Leases`` stream (docs/lease-stream.md) and the lease socket with its front process
(docs/lease-socket.md)."""
