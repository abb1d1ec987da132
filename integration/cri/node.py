"""A Kubernetes node's container side, without kubelet: a private containerd whose CRI plugin
has the ``radium`` runtime handler from ``radium setup containerd``, the pause image as its
sandbox image, and a CRI client in place of kubelet (tests and benchmarks/container_start)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from integration.containerd import Containerd
from integration.cri import pause
from integration.cri.client import Cri
from integration.radium_env import RadiumEnv, radium_setup

#: The CRI plugin's containerd namespace.
NAMESPACE = "k8s.io"
MAIN_CONFIG = """version = 2

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause}"
  # This machine denies lowering oom_score_adj (-998 for a sandbox) below containerd's own.
  restrict_oom_score_adj = true

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
    # runc's state inside the daemon's root: a run killed mid-test leaves nothing in /run.
    Root = "{runc_root}"
"""


@contextlib.contextmanager
def cri_node(
    radium: RadiumEnv, config: Path, where: Path, images: dict[str, Path]
) -> Iterator[tuple[Cri, Containerd]]:
    """The node, its Radium configured by ``config``; ``images`` (name -> rootfs tar) imported
    for the CRI. Every pod is stopped and removed, and the setup undone, on the way out."""
    main, dropin = where / "config.toml", where / "conf.d" / "radium.toml"
    env = radium.environ(config)
    env["PATH"] = f"{radium.runtime.parent}:{env['PATH']}"
    daemon = Containerd(env, config=main)
    main.write_text(MAIN_CONFIG.format(pause=pause.IMAGE, runc_root=daemon.root / "runc"))
    radium_setup(radium, "containerd", "--config", str(main), "--dropin", str(dropin))
    client = None
    try:
        daemon.start()
        daemon.import_image(
            pause.pause_tar(), pause.IMAGE, namespace=NAMESPACE, entrypoint=pause.ENTRYPOINT
        )
        for name, tar in images.items():
            daemon.import_image(tar, name, namespace=NAMESPACE)
        client = Cri(daemon.socket, where / "pods")
        yield client, daemon
    finally:
        try:
            if client is not None:
                client.remove_every_pod()
                client.close()
        finally:
            daemon.stop()
            radium_setup(
                radium, "containerd", "--config", str(main), "--dropin", str(dropin), "--remove"
            )
