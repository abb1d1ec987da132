"""containerd: the radium shim (io.containerd.radium.v2) and radium-runtime as --runc-binary.

nerdctl is not installable here; ``nerdctl --runtime io.containerd.radium.v2`` and
``nerdctl --runtime /path/radium-runtime`` take the same paths through containerd as
``ctr run --runtime io.containerd.radium.v2`` and ``ctr run --runc-binary``, tested below.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from integration import images
from integration.containerd import Containerd
from integration.host import mount_table
from integration.radium_env import RadiumEnv
from integration.test_runc import REPORT

RADIUM_SHIM = ("--runtime", "io.containerd.radium.v2")
IMAGE = "docker.io/radium-test/bookworm:latest"


def image(containerd: Containerd) -> str:
    return containerd.import_image(images.debian_tar("bookworm"), IMAGE)


def report(containerd: Containerd, radium: RadiumEnv, name: str, *runtime: str) -> dict[str, Any]:
    result = containerd.ctr(
        "run",
        "--rm",
        *runtime,
        "--annotation",
        "radium.io/gpus=1",
        image(containerd),
        name,
        "python3",
        "-c",
        REPORT,
        check=False,
    )
    assert result.returncode == 0, f"{result.stderr}\n{radium.logs()}\n{containerd.log_tail()}"
    data: dict[str, Any] = json.loads(result.stdout)
    return data


@pytest.mark.parametrize(
    "runtime",
    [RADIUM_SHIM, ("--runc-binary", "RADIUM_RUNTIME")],
    ids=["shim-io.containerd.radium.v2", "runc-binary-radium-runtime"],
)
def test_bundle_is_mounted_and_interposer_imports(
    containerd: Containerd, radium: RadiumEnv, runtime: tuple[str, str]
) -> None:
    args = tuple(str(radium.runtime) if a == "RADIUM_RUNTIME" else a for a in runtime)
    data = report(containerd, radium, f"c-{runtime[0].strip('-')}", *args)
    assert data["bundle"]["name"] == "glibc-x86_64"
    assert data["platform"]["distro_version"] == "12"
    assert data["request"] == {"radium.io/gpus": "1"}
    assert (data["ro"], data["nosuid"], data["nodev"]) == (True, True, True)


def test_twenty_containers_leave_nothing_behind(containerd: Containerd, radium: RadiumEnv) -> None:
    image(containerd)
    before = mount_table()
    for i in range(20):
        result = containerd.ctr(
            "run",
            "--rm",
            *RADIUM_SHIM,
            "--annotation",
            "radium.io/gpus=1",
            IMAGE,
            f"row-{i}",
            "cat",
            "/run/radium/info.json",
            check=False,
        )
        assert result.returncode == 0, f"run {i}: {result.stderr}\n{radium.logs()}"
        assert json.loads(result.stdout)["container_id"] == f"row-{i}"
    assert containerd.shim_pids() == []
    assert containerd.task_dirs() == []
    assert containerd.ctr("containers", "ls", "-q").stdout.split() == []
    assert list(radium.state_dir.iterdir()) == []
    assert mount_table() == before


def test_container_that_asks_nothing_runs_as_with_runc(containerd: Containerd) -> None:
    probe = "grep -c radium /proc/self/mountinfo; ls /run"
    outputs = []
    for name, runtime in (
        ("plain-radium", RADIUM_SHIM),
        ("plain-runc", ("--runtime", "io.containerd.runc.v2")),
    ):
        result = containerd.ctr(
            "run", "--rm", *runtime, image(containerd), name, "sh", "-c", probe, check=False
        )
        outputs.append((result.returncode, result.stdout))
    assert outputs[0] == outputs[1]
    assert outputs[0][1].startswith("0\n")


def test_spec_of_plain_container_is_not_edited(containerd: Containerd) -> None:
    containerd.ctr("run", "-d", *RADIUM_SHIM, image(containerd), "idle-plain", "sleep", "30")
    try:
        config = (
            containerd.root
            / "state"
            / "io.containerd.runtime.v2.task"
            / containerd.namespace
            / "idle-plain"
            / "config.json"
        )
        text = config.read_text()
        assert "hooks" not in json.loads(text)
        assert "radium.io/" not in text and "radium-hook" not in text
    finally:
        containerd.ctr("tasks", "kill", "-s", "SIGKILL", "idle-plain", check=False)
        containerd.ctr("tasks", "delete", "-f", "idle-plain", check=False)
        containerd.ctr("containers", "delete", "idle-plain", check=False)


def test_shim_start_errors_reach_the_user(containerd: Containerd) -> None:
    result = containerd.ctr(
        "run",
        "--rm",
        *RADIUM_SHIM,
        "--annotation",
        "radium.io/fraction=2",
        image(containerd),
        "bad-request",
        "true",
        check=False,
    )
    assert result.returncode != 0
    assert "radium.io/fraction must be a GPU fraction in (0, 1], got '2'" in result.stderr
    assert containerd.shim_pids() == []
    containerd.ctr("containers", "delete", "bad-request", check=False)
