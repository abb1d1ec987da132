"""A private dockerd for tests: own data root, exec root and socket, no bridge, no iptables."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from integration.host import log_tail, need, start_daemon, stop_daemon

IMAGE_PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class Dockerd:
    def __init__(
        self,
        runtimes: dict[str, Path],
        env: dict[str, str],
        config_file: Path | None = None,
        prefix: list[str] | None = None,
    ) -> None:
        """``prefix`` runs dockerd under it, e.g. ``ip netns exec NAME`` (another "host")."""
        self.dockerd = need("dockerd", "docker.io")
        self.client = (
            "/usr/bin/docker" if os.path.exists("/usr/bin/docker") else need("docker", "docker.io")
        )
        need("containerd")
        # Short: containerd's socket lives below it and unix socket paths are limited to 108 bytes.
        self.root = Path(tempfile.mkdtemp(prefix="rdk-", dir="/tmp"))
        self.socket = self.root / "docker.sock"
        self.runtimes = runtimes
        self.config_file = config_file
        self.env = env
        self.prefix = prefix or []
        self.process: subprocess.Popen[bytes] | None = None
        self._images: dict[str, str] = {}
        #: where trace-config.sh records config.json hashes, when a test installs it
        self.trace_dir = self.root / "trace"

    def start(self, timeout: float = 90) -> None:
        argv = [
            *self.prefix,
            self.dockerd,
            f"--data-root={self.root / 'data'}",
            f"--exec-root={self.root / 'x'}",
            f"--pidfile={self.root / 'docker.pid'}",
            f"--host=unix://{self.socket}",
            "--bridge=none",
            "--iptables=false",
            "--ip-masq=false",
            "--storage-driver=overlay2",
            "--log-level=warn",
            *(f"--add-runtime={name}={path}" for name, path in self.runtimes.items()),
            *([f"--config-file={self.config_file}"] if self.config_file else []),
        ]
        self.process = start_daemon(
            "dockerd",
            argv,
            self.env,
            self.root / "dockerd.log",
            lambda: self.docker("version", check=False, timeout=10).returncode == 0,
            timeout,
        )

    def log_tail(self) -> str:
        return log_tail(self.root / "dockerd.log")

    def docker(
        self, *args: str, check: bool = True, timeout: float = 180, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [self.client, "-H", f"unix://{self.socket}", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input,
            check=False,
            env={"PATH": os.environ["PATH"], "DOCKER_BUILDKIT": "0", "HOME": str(self.root)},
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"docker {' '.join(args)} failed ({result.returncode}):\n{result.stderr}"
            )
        return result

    def import_image(self, tar: Path, name: str) -> str:
        """Import a rootfs tar once; the image id."""
        if name not in self._images:
            self.docker("import", "--change", f"ENV {IMAGE_PATH_ENV}", str(tar), name, timeout=600)
            self._images[name] = self.image_id(name)
        return self._images[name]

    def image_id(self, name: str) -> str:
        return self.docker("image", "inspect", "--format", "{{.Id}}", name).stdout.strip()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            ids = self.docker("ps", "-aq", check=False, timeout=30).stdout.split()
            if ids:
                self.docker("rm", "-f", *ids, check=False, timeout=120)
        stop_daemon(self.process, self.root)
