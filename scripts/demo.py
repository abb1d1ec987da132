"""The main job, as far as Radium goes today.

1. The embedded default: `radium up` starts a pool and a CPU acceptor on this machine; `radium
   gpus` shows the pool's devices, and a lease is taken and given back through the pool.
2. An unmodified Debian image gets Radium's interposer at `docker run`: a private dockerd (own
   data root and socket, no bridge, no iptables) with the `radium` runtime runs the same image
   with and without `--runtime=radium`; the interposer reports from inside the container.
Wiring the container's lease through the node agent, and remote execution, are the next steps.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from integration import images
from integration.dockerd import Dockerd
from integration.pool import free_port
from integration.radium_env import make_env
from radium import config as config_module
from radium.poolclient import PoolClient

IMAGE = "radium-demo/debian:bookworm"
PROBE = "import radium_interposer"
CLI = str(Path(sys.executable).parent / "radium")


def pool_demo(state: Path) -> None:
    listen = f"127.0.0.1:{free_port()}"
    print(f"$ radium up --listen {listen}")
    up = subprocess.Popen(
        [CLI, "up", "--state-dir", str(state), "--listen", listen],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert up.stdout is not None
        print(up.stdout.readline().rstrip())
        env = {**os.environ, "RADIUM_CONFIG": str(state / "config.toml")}
        print("\n$ radium gpus")
        subprocess.run([CLI, "gpus"], env=env, check=True)
        token = config_module.load(state / "config.toml").client.token
        client = PoolClient(listen, token)
        lease = client.allocate(fraction=0.5, holder="demo")
        print(
            f"\nleased {lease.fraction:g} of {lease.acceptor}/{','.join(lease.device_ids)} "
            f"({lease.memory_mib} MiB) as {lease.id}\n$ radium leases"
        )
        subprocess.run([CLI, "leases"], env=env, check=True)
        client.release(lease.id)
        client.close()
    finally:
        up.send_signal(signal.SIGTERM)
        up.wait(timeout=30)


def docker_demo(root: Path) -> int:
    radium = make_env(root)
    names = ", ".join(sorted(p.name for p in radium.bundles.iterdir()))
    print(f"\nbundles built in {radium.bundles}: {names}")
    daemon = Dockerd({"radium": radium.runtime}, radium.environ())
    try:
        daemon.start()
        daemon.import_image(images.debian_tar("bookworm"), IMAGE)
        plain = daemon.docker(
            "run", "--rm", "--network", "none", IMAGE, "python3", "-c", PROBE, check=False
        )
        print(f"\n$ docker run --rm {IMAGE} python3 -c '{PROBE}'")
        print(plain.stderr.strip().splitlines()[-1] if plain.returncode else "(imported?!)")
        command = f"docker run --rm --runtime=radium -e RADIUM_GPUS=1 {IMAGE}"
        print(f"\n$ {command} python3 -m radium_interposer")
        result = daemon.docker(
            "run",
            "--rm",
            "--network",
            "none",
            "--runtime=radium",
            "-e",
            "RADIUM_GPUS=1",
            IMAGE,
            "python3",
            "-m",
            "radium_interposer",
            check=False,
        )
        print(result.stdout.strip() or result.stderr.strip())
        return result.returncode
    finally:
        daemon.stop()


def main() -> int:
    root = Path(tempfile.mkdtemp(prefix="radium-demo-"))
    try:
        pool_demo(root / "up")
        return docker_demo(root / "docker")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
