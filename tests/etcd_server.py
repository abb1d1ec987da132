"""Real etcd members for tests: started on free loopback ports (or an address a namespace
gives), stopped by pid. A missing etcd binary fails the test: it never skips."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import requests

from tests.ports import free_port


@dataclass
class EtcdMember:
    name: str
    data_dir: Path
    host: str = "127.0.0.1"
    client_port: int = field(default_factory=free_port)
    peer_port: int = field(default_factory=free_port)
    #: A command prefix, e.g. ``ip netns exec NAME``, to run the member in a namespace.
    wrapper: Sequence[str] = ()
    #: Tests run without fsync (their data is thrown away); a benchmark runs as etcd does.
    fsync: bool = False
    process: subprocess.Popen[bytes] | None = None

    @property
    def client_url(self) -> str:
        return f"http://{self.host}:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://{self.host}:{self.peer_port}"

    def start(self, initial_cluster: str, state: str = "new") -> None:
        binary = shutil.which("etcd")
        assert binary, "etcd is not installed (Debian etcd-server; scripts/setup installs it)"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        argv = [
            *self.wrapper,
            binary,
            f"--name={self.name}",
            f"--data-dir={self.data_dir / 'data'}",
            f"--listen-client-urls={self.client_url}",
            f"--advertise-client-urls={self.client_url}",
            f"--listen-peer-urls={self.peer_url}",
            f"--initial-advertise-peer-urls={self.peer_url}",
            f"--initial-cluster={initial_cluster}",
            f"--initial-cluster-state={state}",
            "--initial-cluster-token=radium-tests",
            # Fast elections (and so a 1 s least lease TTL): the failover tests measure ours.
            "--heartbeat-interval=50",
            "--election-timeout=500",
            "--log-level=warn",
            *(() if self.fsync else ("--unsafe-no-fsync",)),
        ]
        with open(self.data_dir / "etcd.log", "ab") as log:
            self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)

    def healthy(self) -> bool:
        try:
            answer = requests.get(f"{self.client_url}/health", timeout=1)
            return answer.status_code == 200 and answer.json().get("health") == "true"
        except (requests.RequestException, ValueError):
            return False

    def kill(self, signum: int = signal.SIGKILL) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signum)
            self.process.wait(timeout=30)

    def log_tail(self) -> str:
        path = self.data_dir / "etcd.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""


class EtcdCluster:
    def __init__(self, members: list[EtcdMember]) -> None:
        self.members = members

    @property
    def initial_cluster(self) -> str:
        return ",".join(f"{m.name}={m.peer_url}" for m in self.members)

    @property
    def endpoints(self) -> list[str]:
        return [m.client_url for m in self.members]

    def start(self, timeout: float = 20) -> None:
        for member in self.members:
            member.start(self.initial_cluster)
        self.wait_healthy(self.members, timeout)

    def wait_healthy(self, members: list[EtcdMember], timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while not all(m.healthy() for m in members):
            if time.monotonic() > deadline:
                raise AssertionError(
                    "etcd did not become healthy:\n" + "\n".join(m.log_tail() for m in members)
                )
            time.sleep(0.1)

    def stop(self) -> None:
        for member in self.members:
            member.kill()


def single(root: Path) -> EtcdCluster:
    return EtcdCluster([EtcdMember("solo", root / "etcd-solo")])


def three(root: Path, fsync: bool = False) -> EtcdCluster:
    """Three members on loopback: a cluster that outlives one of them."""
    return EtcdCluster([EtcdMember(f"m{n}", root / f"m{n}", fsync=fsync) for n in range(3)])
