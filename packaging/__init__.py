"""Packaging: the client bundle builder and the data files Radium ships (rules, hooks.d, ...)."""
