"""`radium setup ENGINE` output, used by real daemons: dockerd, containerd, podman."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from integration import images
from integration.containerd import Containerd
from integration.dockerd import Dockerd
from integration.podman import Podman
from integration.radium_env import RadiumEnv, radium_setup
from integration.test_runc import REPORT
from radium.agent import nativeclient

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def test_docker_daemon_json_from_setup(radium: RadiumEnv, tmp_path: Path) -> None:
    config = tmp_path / "daemon.json"
    original = b'{\n  "max-concurrent-downloads": 2,\n  "features": {"buildkit": false}\n}\n'
    config.write_bytes(original)
    out = radium_setup(radium, "docker", "--config", str(config))
    assert "restart dockerd" in out
    native = radium.runtime.parent / nativeclient.NAME  # scripts/setup built it
    assert radium_setup(radium, "docker", "--config", str(config)) == (
        f"{config}: unchanged\n{native}: present\n"
    )
    daemon = Dockerd({}, radium.environ(), config_file=config)
    try:
        daemon.start()
        runtimes = json.loads(daemon.docker("info", "--format", "{{json .Runtimes}}").stdout)
        assert runtimes["radium"]["path"] == str(radium.runtime)
        tag = "radium-test/bookworm:setup"
        daemon.import_image(images.debian_tar("bookworm"), tag)
        result = daemon.docker(
            "run",
            "--rm",
            "--network",
            "none",
            "--runtime=radium",
            "-e",
            "RADIUM_GPUS=1",
            tag,
            "python3",
            "-c",
            REPORT,
            check=False,
        )
        assert result.returncode == 0, f"{result.stderr}\n{radium.logs()}"
        assert json.loads(result.stdout)["bundle"]["name"] == "glibc-x86_64"
    finally:
        daemon.stop()
    radium_setup(radium, "docker", "--config", str(config), "--remove")
    assert config.read_bytes() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == ["daemon.json"]


CONTAINERD_MAIN = """version = 2

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.9"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
    SystemdCgroup = true
"""


def test_containerd_config_from_setup(radium: RadiumEnv, tmp_path: Path) -> None:
    main, dropin = tmp_path / "config.toml", tmp_path / "conf.d" / "radium.toml"
    main.write_text(CONTAINERD_MAIN)
    radium_setup(radium, "containerd", "--config", str(main), "--dropin", str(dropin))
    env = radium.environ()
    env["PATH"] = f"{radium.runtime.parent}:{env['PATH']}"
    daemon = Containerd(env, config=main)
    dump = subprocess.run(
        daemon.command("config", "dump"), capture_output=True, text=True, check=True, env=env
    )
    dumped: dict[str, Any] = tomllib.loads(dump.stdout)
    cri = dumped["plugins"]["io.containerd.grpc.v1.cri"]
    runtime = cri["containerd"]["runtimes"]["radium"]
    # containerd replaces the main config's CRI section with the drop-in's: nothing of the
    # node's own may be lost with it.
    assert cri["sandbox_image"] == "registry.k8s.io/pause:3.9"
    assert cri["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"] is True
    assert runtime["runtime_type"] == "io.containerd.runc.v2"
    assert runtime["options"]["BinaryName"] == str(radium.runtime)
    assert runtime["pod_annotations"] == ["radium.io/*"]
    assert runtime["options"]["SystemdCgroup"] is True  # copied from the runc runtime
    try:
        daemon.start()
        image = daemon.import_image(
            images.debian_tar("bookworm"), "docker.io/radium-test/bookworm:setup"
        )
        # The same runc binary through ctr (test_cri.py drives the CRI plugin itself).
        result = daemon.ctr(
            "run",
            "--rm",
            "--runc-binary",
            runtime["options"]["BinaryName"],
            "--annotation",
            "radium.io/gpus=1",
            image,
            "from-setup",
            "python3",
            "-c",
            REPORT,
            check=False,
        )
        assert result.returncode == 0, f"{result.stderr}\n{radium.logs()}"
        assert json.loads(result.stdout)["platform"]["distro_id"] == "debian"
    finally:
        daemon.stop()
    radium_setup(radium, "containerd", "--config", str(main), "--dropin", str(dropin), "--remove")
    assert main.read_text() == CONTAINERD_MAIN
    assert not dropin.exists()


def test_podman_hooks_dir_from_setup(radium: RadiumEnv, tmp_path: Path) -> None:
    hooks = tmp_path / "hooks.d"
    radium_setup(radium, "podman", "--config", str(hooks))
    podman = Podman(hooks, radium.environ())
    try:
        podman.podman(
            "import", str(images.debian_tar("bookworm")), "localhost/radium-test/bookworm"
        )
        asked = podman.run(
            "--annotation",
            "radium.io/gpus=1",
            "localhost/radium-test/bookworm",
            "python3",
            "-c",
            REPORT,
            check=False,
        )
        assert asked.returncode == 0, f"{asked.stderr}\n{radium.logs()}"
        data = json.loads(asked.stdout)
        assert data["bundle"]["name"] == "glibc-x86_64"
        assert data["request"] == {"radium.io/gpus": "1"}
        assert data["ro"] is True
        plain = podman.run(
            "localhost/radium-test/bookworm",
            "grep",
            "-c",
            "radium",
            "/proc/self/mountinfo",
            check=False,
        )
        assert plain.stdout.strip() == "0"
    finally:
        podman.stop()
    assert list(radium.state_dir.iterdir()) == []
