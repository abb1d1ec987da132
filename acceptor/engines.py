"""The acceptor's local container engine: pull, inspect and remove registered images.

docker is driven through its Engine API on its unix socket (the pull streams per-layer byte
progress); containerd through ``ctr``. Both report progress as a fraction in [0, 1].
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import shutil
import socket
import subprocess
import time
import urllib.parse
from typing import Any, Callable, Mapping, Protocol

from radium.errors import RadiumError, ServiceError, UnavailableError

__all__ = [
    "PULL_TIMEOUT",
    "Containerd",
    "Docker",
    "Engine",
    "Progress",
    "PullError",
    "choose",
]

log = logging.getLogger(__name__)
Progress = Callable[[float], None]
PULL_TIMEOUT = 3600.0


class PullError(RadiumError):
    """The engine could not pull the image; the message is the engine's (registry's) reason."""


class Engine(Protocol):
    """A container engine as the acceptor uses it: pull, inspect and remove images."""

    name: str

    def pull(self, ref: str, progress: Progress) -> str:
        """Pull ``ref``; its digest."""
        ...

    def digest(self, ref: str) -> str | None:
        """The digest of ``ref`` when present locally."""
        ...

    def remove(self, ref: str) -> None: ...


class _UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


class Docker:
    """docker through its Engine API on its unix socket: images, and container-mode workers."""

    name = "docker"

    def __init__(self, address: str = "") -> None:
        self.socket = (address or "unix:///var/run/docker.sock").removeprefix("unix://")

    def _request(
        self, method: str, path: str, timeout: float = 60, body: object = None
    ) -> tuple[_UnixHTTP, http.client.HTTPResponse]:
        connection = _UnixHTTP(self.socket, timeout)
        try:
            if body is None:
                connection.request(method, path)
            else:
                payload = json.dumps(body).encode()
                connection.request(method, path, payload, {"Content-Type": "application/json"})
            return connection, connection.getresponse()
        except OSError as exc:
            connection.close()
            raise UnavailableError(f"docker at {self.socket}: {exc}") from exc

    def pull(self, ref: str, progress: Progress) -> str:
        query = urllib.parse.urlencode({"fromImage": ref})
        connection, response = self._request("POST", f"/images/create?{query}", PULL_TIMEOUT)
        layers: dict[str, tuple[int, int]] = {}
        last = 0.0
        try:
            if response.status != 200:
                raise PullError(_message(response.read()) or f"HTTP {response.status}")
            for line in response:
                event = json.loads(line) if line.strip() else {}
                if event.get("error"):
                    raise PullError(str(event["error"]).strip())
                layer, detail = event.get("id"), event.get("progressDetail") or {}
                status = str(event.get("status", ""))
                if layer and detail.get("total"):
                    layers[layer] = (int(detail.get("current", 0)), int(detail["total"]))
                elif layer and status in ("Pull complete", "Already exists") and layer in layers:
                    layers[layer] = (layers[layer][1], layers[layer][1])
                if layers and time.monotonic() - last > 0.2:
                    last = time.monotonic()
                    progress(
                        sum(c for c, _ in layers.values()) / sum(t for _, t in layers.values())
                    )
        finally:
            connection.close()
        digest = self.digest(ref)
        if digest is None:
            raise PullError(f"{ref} is not present after the pull")
        return digest

    def digest(self, ref: str) -> str | None:
        connection, response = self._request("GET", f"/images/{urllib.parse.quote(ref)}/json")
        try:
            if response.status == 404:
                return None
            data = json.loads(response.read())
        finally:
            connection.close()
        digests = data.get("RepoDigests") or []
        return str(digests[0].rpartition("@")[2] if digests else data.get("Id", ""))

    def _call(self, method: str, path: str, body: object = None) -> dict[str, Any]:
        """One API call answered with JSON (or nothing); an error status raises its message."""
        connection, response = self._request(method, path, body=body)
        try:
            data = response.read()
            if response.status >= 400:
                raise ServiceError(f"docker: {_message(data) or f'HTTP {response.status}'}")
        finally:
            connection.close()
        parsed = json.loads(data) if data.strip() else {}
        return parsed if isinstance(parsed, dict) else {}

    def run_container(
        self,
        name: str,
        image: str,
        command: list[str],
        *,
        env: dict[str, str],
        binds: list[str],
        workdir: str,
        runtime: str,
        memory_bytes: int = 0,
        nano_cpus: int = 0,
        user: str = "",
        confinement: Mapping[str, Any] | None = None,
    ) -> str:
        """Create and start a detached container with no network; its id. ``confinement`` adds
        HostConfig fields (capabilities, seccomp, read-only root ...)."""
        host = {
            "Binds": binds,
            "NetworkMode": "none",
            "Runtime": runtime,
            "Memory": memory_bytes,
            "NanoCpus": nano_cpus,
            **(confinement or {}),
        }
        body = {
            "Image": image,
            "Cmd": command,
            "Env": [f"{k}={v}" for k, v in env.items()],
            "WorkingDir": workdir,
            "User": user,
            "HostConfig": host,
        }
        # A worker container of an acceptor that died (no one removed it) would block the name.
        self.remove_container(name)
        query = urllib.parse.urlencode({"name": name})
        container = str(self._call("POST", f"/containers/create?{query}", body).get("Id", ""))
        self._call("POST", f"/containers/{container}/start")
        return container

    def container_state(self, container: str) -> dict[str, Any]:
        state = self._call("GET", f"/containers/{container}/json").get("State")
        return state if isinstance(state, dict) else {}

    def container_logs(self, container: str, lines: int = 20) -> str:
        """The container's last output lines (docker's multiplexed stream, headers removed)."""
        connection, response = self._request(
            "GET", f"/containers/{container}/logs?stdout=1&stderr=1&tail={lines}"
        )
        try:
            raw = response.read()
        finally:
            connection.close()
        out, offset = [], 0
        while offset + 8 <= len(raw):
            size = int.from_bytes(raw[offset + 4 : offset + 8], "big")
            out.append(raw[offset + 8 : offset + 8 + size])
            offset += 8 + size
        return b"".join(out).decode("utf-8", "replace").strip()

    def remove_container(self, container: str) -> None:
        with contextlib.suppress(RadiumError):  # gone already
            self._call("DELETE", f"/containers/{container}?force=1")

    def remove(self, ref: str) -> None:
        connection, response = self._request("DELETE", f"/images/{urllib.parse.quote(ref)}?force=1")
        try:
            if response.status not in (200, 404):
                raise PullError(_message(response.read()) or f"HTTP {response.status}")
        finally:
            connection.close()


class Containerd:
    """containerd through ``ctr`` (namespace ``default``); progress is start and end only."""

    name = "containerd"

    def __init__(self, address: str = "") -> None:
        self.address = address or "/run/containerd/containerd.sock"
        self.ctr = shutil.which("ctr") or "ctr"

    def _ctr(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.ctr, "-a", self.address, *args], capture_output=True, text=True, timeout=3600
        )

    def pull(self, ref: str, progress: Progress) -> str:
        progress(0.0)
        plain = ["--plain-http"] if ref.startswith(("localhost", "127.")) else []
        done = self._ctr("images", "pull", *plain, ref)
        if done.returncode != 0:
            raise PullError((done.stderr.strip().splitlines() or ["ctr pull failed"])[-1])
        digest = self.digest(ref)
        if digest is None:
            raise PullError(f"{ref} is not present after the pull")
        return digest

    def digest(self, ref: str) -> str | None:
        done = self._ctr("images", "ls", f"name=={ref}")
        rows = done.stdout.splitlines()[1:] if done.returncode == 0 else []
        fields = rows[0].split() if rows else []
        return fields[2] if len(fields) > 2 else None

    def remove(self, ref: str) -> None:
        done = self._ctr("images", "rm", ref)
        if done.returncode != 0 and "not found" not in done.stderr:
            raise PullError(done.stderr.strip())


def _message(body: bytes) -> str:
    try:
        return str(json.loads(body).get("message", "")).strip()
    except (ValueError, AttributeError):
        return body.decode("utf-8", "replace").strip()


def choose(name: str, address: str) -> Engine | None:
    """The engine the config names, or None for none."""
    if name == "docker":
        return Docker(address)
    if name == "containerd":
        return Containerd(address)
    return None
