"""The main job, today: an unmodified Debian image gets Radium's interposer at `docker run`.

Starts a private dockerd (its own data root and socket, no bridge, no iptables) with the
`radium` runtime, imports a debootstrapped Debian bookworm image, runs the same image with and
without `--runtime=radium`, and prints what the interposer reports from inside the container.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from integration import images
from integration.dockerd import Dockerd
from integration.radium_env import make_env

IMAGE = "radium-demo/debian:bookworm"
PROBE = "import radium_interposer"


def main() -> int:
    radium = make_env(Path(tempfile.mkdtemp(prefix="radium-demo-")))
    names = ", ".join(sorted(p.name for p in radium.bundles.iterdir()))
    print(f"bundles built in {radium.bundles}: {names}")
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
        shutil.rmtree(radium.root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
