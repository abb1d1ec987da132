"""The main job on the embedded default: an unmodified container's numpy runs on the acceptor.

1. `radium up` starts a pool, a CPU acceptor and the node agent on this machine; `radium gpus`
   shows the pool's devices.
2. A private dockerd (own data root and socket, no bridge, no iptables) gets the `radium`
   runtime, configured to lease from that pool. The Debian image has no numpy (plain runc shows
   it). Under `--runtime=radium -e RADIUM_GPUS=1 -e RADIUM_REMOTE=numpy --network none` the hook
   mounts the client bundle, the agent takes a lease and hands the container a connection to the
   lease's worker, and the application's numpy runs there: it prints its result, the lease, and
   what ran where (the worker's calls, bytes and busy time).
3. `radium leases --all` shows the lease released.
Without docker, the same application runs as a local process under `radium exec`.
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
PROBE = "import numpy"
FIRST_BUILD = "about 2 minutes the first time"
APP = """
import json, time
import numpy as np
from radium_interposer import proxy
started = time.perf_counter()
a = np.random.rand(1500, 1500)
ok = np.allclose(np.linalg.inv(a) @ a, np.eye(1500))
took = time.perf_counter() - started
print(f"np.allclose(np.linalg.inv(a) @ a, np.eye(1500)) = {ok}   ({took:.2f} s)")
lease = json.load(open("/run/radium/lease.json"))
if lease:
    print(f"lease {lease['id']} on acceptor {lease['acceptor']} {lease['devices']}")
s = proxy.stats()
print(f"ran on the acceptor: {s['calls']} calls, {s['busy_seconds']:.2f} s busy; array data"
      f" sent to it {s['bytes_in']} B, back {s['bytes_out']} B")
"""


def say(text: str) -> None:
    """A step of the demo's own on stderr (stdout is the transcript): no minute is silent."""
    print(f"demo: {text}", file=sys.stderr, flush=True)


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
        first = up.stdout.readline().rstrip()
        if not first.startswith("Radium is up"):  # it said why on stderr, in one line
            return up.wait() or 1
        print(first)
        up_config = root / "up" / "config.toml"
        pool_env = {**os.environ, "RADIUM_CONFIG": str(up_config)}
        show([CLI, "gpus"], pool_env)
        if shutil.which("dockerd") is None:  # no docker: the same application as a local process
            app = root / "app.py"
            app.write_text(APP.replace('json.load(open("/run/radium/lease.json"))', "{}"))
            print("\n$ radium exec --remote numpy -- python3 app.py   (docker is not installed)")
            return subprocess.run(
                [CLI, "exec", "--remote", "numpy", "--", "/usr/bin/python3", str(app)],
                env=pool_env,
                check=False,
            ).returncode

        radium = make_env(root / "docker")
        engine_config = radium.config
        engine_config.write_text(engine_config.read_text() + _pool_sections(up_config))
        say("starting a private dockerd (its own data root and socket) with the radium runtime...")
        daemon = Dockerd({"radium": radium.runtime}, radium.environ())
        daemon.start()
        if not images.debian_built("bookworm"):
            say(f"building the Debian bookworm image (debootstrap, {FIRST_BUILD})...")
        tar = images.debian_tar("bookworm")
        say(f"importing the image {IMAGE} into it...")
        daemon.import_image(tar, IMAGE)
        plain = daemon.docker(
            "run", "--rm", "--network", "none", IMAGE, "python3", "-c", PROBE, check=False
        )
        print(f"\n$ docker run --rm {IMAGE} python3 -c '{PROBE}'")
        print(plain.stderr.strip().splitlines()[-1] if plain.returncode else "(imported?!)")
        print(
            f"\n$ docker run --rm --network none --runtime=radium -e RADIUM_GPUS=1 "
            f"-e RADIUM_REMOTE=numpy {IMAGE} python3 app.py"
        )
        result = daemon.docker(
            "run", "--rm", "--network", "none", "--runtime=radium", "-e", "RADIUM_GPUS=1",
            "-e", "RADIUM_REMOTE=numpy", IMAGE, "python3", "-c", APP, check=False,
        )  # fmt: skip
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
