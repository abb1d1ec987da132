"""radium-hook: the OCI hook that injects Radium's client bundle into unmodified containers."""
