"""Issue 34, hole 2: the image must not decide the lease, only what the user typed.

An image built with ``ENV RADIUM_GPUS=2 RADIUM_PRIORITY=inference RADIUM_WAIT=3600`` is run by a
private dockerd that has Radium as its default runtime, and a podman image is built with
``--annotation radium.io/gpus=2``. Each probe runs once through the real wrapper/hook and once
through the same program with the image-record check replaced by one that trusts everything
(the old behaviour), to show the probe catches the hole. What the container was given is read
from ``/run/radium/info.json``, whose ``request`` is what its lease is allocated from.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from integration import images, runc
from integration.conftest import Rootfs
from integration.containerd import Containerd
from integration.dockerd import IMAGE_PATH_ENV, Dockerd
from integration.oci_archive import oci_archive
from integration.podman import Podman
from integration.radium_env import RadiumEnv, radium_setup

HOSTILE_ENV = "ENV RADIUM_GPUS=2 RADIUM_PRIORITY=inference RADIUM_WAIT=3600"
TAKEN = {"radium.io/gpus": "2", "radium.io/priority": "inference", "radium.io/wait": "3600"}
HOSTILE_CTR = "docker.io/radium-test/hostile:latest"
SHOW = ("sh", "-c", "cat /run/radium/info.json 2>/dev/null || echo '{}'")
# The same program with the old behaviour: every value in the spec read as the user's.
UNPROTECTED = """#!{python} -I
import sys
from radium.shim import image_record
from radium.shim.request import NOTHING_SET
image_record.lookup = lambda *args: NOTHING_SET
image_record.podman = lambda *args: None
from {module} import main
sys.exit(main())
"""


def unprotected(where: Path, module: str) -> Path:
    path = where / f"unprotected-{module.rsplit('.', 1)[-1]}"
    path.write_text(UNPROTECTED.format(python=sys.executable, module=module))
    path.chmod(0o755)
    return path


def request(result: Any) -> dict[str, str] | None:
    """The request the container was given, None when Radium left it alone."""
    assert result.returncode == 0, result.stderr
    info: dict[str, Any] = json.loads(result.stdout)
    return info.get("request")


@pytest.fixture(scope="module")
def default_dockerd(
    radium: RadiumEnv, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Dockerd]:
    """A dockerd whose default runtime is radium (``radium setup docker --set-as-default``),
    with ``radium-unprotected`` beside it, and the hostile image imported."""
    where = tmp_path_factory.mktemp("hostile-docker")
    daemon_json = where / "daemon.json"
    runtimes = {
        "radium": {"path": str(radium.runtime)},
        "radium-unprotected": {"path": str(unprotected(where, "radium.shim.runtime_main"))},
    }
    # dockerd checks default-runtime against the file's runtimes, not --add-runtime's.
    daemon_json.write_text(json.dumps({"default-runtime": "radium", "runtimes": runtimes}))
    daemon = Dockerd({}, radium.environ(), config_file=daemon_json)
    try:
        daemon.start()
        tar = images.busybox_tar()
        changes = ("--change", HOSTILE_ENV, "--change", f"ENV {IMAGE_PATH_ENV}")
        daemon.docker("import", *changes, str(tar), "radium-test/hostile", timeout=600)
        yield daemon
    finally:
        daemon.stop()


def docker_show(daemon: Dockerd, *args: str) -> dict[str, str] | None:
    return request(
        daemon.docker("run", "--rm", "--network", "none", *args, "radium-test/hostile", *SHOW)
    )


def test_an_images_env_takes_nothing_under_the_default_or_the_named_runtime(
    default_dockerd: Dockerd, radium: RadiumEnv
) -> None:
    assert docker_show(default_dockerd) is None  # plain `docker run IMG`, radium the default
    assert docker_show(default_dockerd, "--runtime=radium") is None
    log = radium.runtime_log.read_text()
    assert "RADIUM_PRIORITY=inference is the image's ENV (or equal to it): ignored" in log
    # The user is unaffected: what they typed asks, and only that.
    assert docker_show(default_dockerd, "-e", "RADIUM_GPUS=1") == {"radium.io/gpus": "1"}
    mine = docker_show(default_dockerd, "--runtime=radium", "-e", "RADIUM_WAIT=5")
    assert mine == {"radium.io/wait": "5"}
    # The old behaviour, same image, same command line: the image took the pool.
    assert docker_show(default_dockerd, "--runtime=radium-unprotected") == TAKEN


def test_radium_run_still_asks_for_its_lease(default_dockerd: Dockerd, radium: RadiumEnv) -> None:
    """`radium run` passes -e: what it passes asks, even a value equal to the image's own
    (``--gpus 2``), and the image's priority and wait do not."""
    cli = radium.runtime.parent / "radium"
    env = {**radium.environ(), "DOCKER_HOST": f"unix://{default_dockerd.socket}"}
    env["PATH"] = f"{Path(default_dockerd.client).parent}:{env['PATH']}"
    argv = [str(cli), "run", "--gpus", "2", "--rm", "--network", "none", "radium-test/hostile"]
    result = subprocess.run(
        [*argv, *SHOW], capture_output=True, text=True, timeout=300, env=env, check=False
    )
    assert request(result) == {"radium.io/gpus": "2", "radium.io/image": "radium-test/hostile"}


@pytest.fixture(scope="module")
def podman(radium: RadiumEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Podman]:
    """podman with Radium's hooks.d (``radium setup podman``) and an image built with
    ``--annotation radium.io/gpus=2``."""
    where = tmp_path_factory.mktemp("hostile-podman")
    hooks = where / "hooks.d"
    radium_setup(radium, "podman", "--config", str(hooks))
    engine = Podman(hooks, radium.environ())
    try:
        engine.podman("import", str(images.busybox_tar()), "localhost/radium-test/busybox")
        context = where / "context"
        context.mkdir()
        (context / "Containerfile").write_text("FROM localhost/radium-test/busybox\n")
        engine.podman(
            "build", "--annotation", "radium.io/gpus=2", "-t", "localhost/hostile", str(context)
        )
        yield engine
    finally:
        engine.stop()


def unprotected_hooks(podman: Podman, where: Path) -> Path:
    """A copy of the hooks.d whose hook is the unprotected launcher of radium-hook."""
    launcher = unprotected(where, "radium.hooks.main")
    hooks = where / "unprotected-hooks.d"
    hooks.mkdir()
    for entry in podman.hooks_dir.iterdir():
        data = json.loads(entry.read_text())
        args = data["hook"]["args"]
        data["hook"]["args"] = [args[0], "-I", str(launcher), args[-1]]
        (hooks / entry.name).write_text(json.dumps(data))
    return hooks


def test_an_images_annotation_takes_nothing_under_podman(
    podman: Podman, radium: RadiumEnv, tmp_path: Path
) -> None:
    assert request(podman.run("localhost/hostile", *SHOW)) is None
    assert "radium.io/gpus=2 is the image's annotation" in radium.hook_log.read_text()
    mine = podman.run("--annotation", "radium.io/gpus=1", "localhost/hostile", *SHOW)
    assert request(mine) == {"radium.io/gpus": "1"}
    # The old behaviour: the image's annotation reached the request.
    protected = podman.hooks_dir
    podman.hooks_dir = unprotected_hooks(podman, tmp_path)
    try:
        assert request(podman.run("localhost/hostile", *SHOW)) == {"radium.io/gpus": "2"}
    finally:
        podman.hooks_dir = protected


REFUSED = (
    "RADIUM_GPUS, RADIUM_PRIORITY, RADIUM_WAIT in the container's environment cannot be told "
    "from the image's ENV under this engine"
)


def ctr_show(containerd: Containerd, name: str, *args: str) -> Any:
    return containerd.ctr("run", "--rm", *args, HOSTILE_CTR, name, *SHOW, check=False)


def test_under_containerd_the_environment_never_asks_and_annotations_do(
    containerd: Containerd, radium: RadiumEnv, tmp_path: Path
) -> None:
    """containerd keeps no record Radium reads: an env request (the image's, or ctr --env, the
    same bytes in the spec) is refused with one line; the user asks with an annotation."""
    tar = oci_archive(images.busybox_tar(), HOSTILE_CTR, HOSTILE_ENV.split()[1:])
    containerd.ctr("images", "import", str(tar), timeout=600)
    shim = ("--runtime", "io.containerd.radium.v2")
    runtime = ("--runc-binary", str(radium.runtime))
    for name, how in (("h-shim", shim), ("h-runc", runtime)):
        refused = ctr_show(containerd, name, *how)
        assert refused.returncode != 0 and REFUSED in refused.stderr, refused.stderr
        assert "ask with the annotation radium.io/gpus=..." in refused.stderr
        containerd.ctr("containers", "delete", name, check=False)
    for name, how in (("u-shim", shim), ("u-runc", runtime)):
        mine = ctr_show(containerd, name, "--annotation", "radium.io/gpus=1", *how)
        assert request(mine) == {"radium.io/gpus": "1"}
    # The old behaviour: the image's ENV was the request.
    old = unprotected(tmp_path, "radium.shim.runtime_main")
    assert request(ctr_show(containerd, "h-old", "--runc-binary", str(old))) == TAKEN


def test_a_hand_written_bundles_env_is_refused_with_one_line(
    radium: RadiumEnv, rootfs: Rootfs, tmp_path: Path
) -> None:
    bundle = runc.make_bundle(tmp_path, rootfs.get("busybox"), ["true"], ["RADIUM_GPUS=1"])
    result = runc.run(radium, bundle)
    assert result.returncode != 0
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith("radium-runtime: RADIUM_GPUS in the container's environment cannot be told")
    ), result.stderr
