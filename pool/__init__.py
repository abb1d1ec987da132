"""The pool: acceptors register their devices; node agents take and give back leases on them.

Four wings, each importing only those before it (``tests/test_layers.py`` holds them to it):

- :mod:`radium.pool.model`: the vocabulary every wing shares (leases, acceptors, queues);
- :mod:`radium.pool.store`: the durable state: the ``Store`` contract, SQLite and etcd behind it,
  group commit, leadership among replicas;
- :mod:`radium.pool.core`: the decisions, with no I/O, no gRPC and no database: placement,
  policies, queues, waiting requests, the in-memory state, and the :class:`Dispatcher` that
  coordinates them;
- :mod:`radium.pool.leases`: the lease operations over the dispatcher and their carriers (the
  gRPC stream, the lease socket and its front process);
- :mod:`radium.pool.api`: the servicers (they only raise), metrics, and the server that wires
  the rest together.
"""
