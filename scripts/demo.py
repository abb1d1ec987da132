"""The main job, as far as Radium goes today, on the embedded default.

1. `radium up` starts a pool, a CPU acceptor and the node agent on this machine; `radium gpus`
   shows the pool's devices.
2. A private dockerd (own data root and socket, no bridge, no iptables) gets the `radium`
   runtime, configured to lease from that pool. An unmodified Debian image cannot import Radium
   under plain runc; under `--runtime=radium -e RADIUM_GPUS=1` the hook mounts the client bundle
   and the container holds a lease from the pool while it runs: it prints what the interposer
   reports and its lease. Afterwards `radium leases --all` shows the lease released.
Remote execution through that lease (the data plane) is the next step.
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

IMAGE = "radium-demo/debian:bookworm"
CLI = str(Path(sys.executable).parent / "radium")
PROBE = "import radium_interposer"
REPORT = (
    "import json, radium_interposer as r; rep = r.report(); "
    "print('interposer from bundle', rep['bundle']['name'], 'in', rep['platform']['pretty_name']); "
    "lease = json.load(open('/run/radium/lease.json')); "
    "print('holding lease', lease['id'], 'on', lease['acceptor'], lease['devices'], "
    "'for', lease['holder'])"
)


def show(command: list[str], env: dict[str, str]) -> None:
    print(f"\n$ {' '.join(['radium', *command[1:]])}")
    subprocess.run(command, env=env, check=True)


def main() -> int:
    root = Path(tempfile.mkdtemp(prefix="radium-demo-"))
    listen = f"127.0.0.1:{free_port()}"
    print(f"$ radium up --listen {listen}")
    up = subprocess.Popen(
        [CLI, "up", "--state-dir", str(root / "up"), "--listen", listen],
        stdout=subprocess.PIPE,
        text=True,
    )
    daemon = None
    try:
        assert up.stdout is not None
        print(up.stdout.readline().rstrip())
        up_config = root / "up" / "config.toml"
        pool_env = {**os.environ, "RADIUM_CONFIG": str(up_config)}
        show([CLI, "gpus"], pool_env)

        radium = make_env(root / "docker")
        engine_config = radium.config
        engine_config.write_text(engine_config.read_text() + _pool_sections(up_config))
        daemon = Dockerd({"radium": radium.runtime}, radium.environ())
        daemon.start()
        daemon.import_image(images.debian_tar("bookworm"), IMAGE)
        plain = daemon.docker(
            "run", "--rm", "--network", "none", IMAGE, "python3", "-c", PROBE, check=False
        )
        print(f"\n$ docker run --rm {IMAGE} python3 -c '{PROBE}'")
        print(plain.stderr.strip().splitlines()[-1] if plain.returncode else "(imported?!)")
        print(
            f"\n$ docker run --rm --runtime=radium -e RADIUM_GPUS=1 {IMAGE} python3 -c '<report>'"
        )
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
            "-c",
            REPORT,
            check=False,
        )
        print(result.stdout.strip() or result.stderr.strip())
        show([CLI, "leases", "--all"], pool_env)
        return result.returncode
    finally:
        if daemon is not None:
            daemon.stop()
        up.send_signal(signal.SIGTERM)
        up.wait(timeout=30)
        shutil.rmtree(root, ignore_errors=True)


def _pool_sections(up_config: Path) -> str:
    """The [client] and [agent] tables of the `radium up` config: how the hook gets leases."""
    text = up_config.read_text()
    keep, out = False, []
    for line in text.splitlines(keepends=True):
        if line.startswith("["):
            keep = line.strip() in ("[client]", "[agent]")
        if keep:
            out.append(line)
    return "".join(out)


if __name__ == "__main__":
    sys.exit(main())
