"""The acceptor: runs leased work on this GPU server's devices, registered with the pool."""
