"""The CRI (``runtime.v1``) as kubelet speaks it: stubs compiled from the published
kubernetes/cri-api protos (``api.proto``, v0.36.3; ``scripts/protos``), a small client over a
containerd's socket, and a pause image built here (none can be pulled)."""
