"""radium-runtime (the runc-compatible wrapper), the containerd shim, request parsing and the
spec modifiers they share. The node agent they hand containers to is :mod:`radium.agent`."""
