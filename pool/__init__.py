"""The pool: acceptors register their devices; node agents take and give back leases on them."""
