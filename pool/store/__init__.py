"""The pool's durable state: the :class:`~radium.pool.store.base.Store` contract, its SQLite and
etcd implementations, group commit, and leadership among etcd replicas (docs/store.md)."""
