"""radium-runtime (runc-compatible wrapper), spec modifiers, and later the containerd shim."""
