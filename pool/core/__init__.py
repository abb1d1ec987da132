"""The pool's decisions: placement, policies, queues, waiting requests, the in-memory state and
the :class:`~radium.pool.core.dispatcher.Dispatcher` over them. No I/O, no gRPC, no database:
the state writes through the :class:`~radium.pool.store.base.Store` it is given."""
