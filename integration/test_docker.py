"""docker run --runtime=radium against a private dockerd, on images imported from real roots."""

from __future__ import annotations

import json
from typing import Any

import pytest

from integration import images
from integration.dockerd import Dockerd
from integration.host import mount_table
from integration.radium_env import RadiumEnv
from integration.test_runc import REPORT

RUN = ("run", "--rm", "--network", "none")
ASK = ("-e", "RADIUM_GPUS=1")


def image(dockerd: Dockerd, name: str) -> str:
    if name in images.SUITES:
        tar = images.debian_tar(name)
    elif name == "alpine":
        tar = images.alpine_tar()
    else:
        raise KeyError(name)
    tag = f"radium-test/{name}:latest"
    dockerd.import_image(tar, tag)
    return tag


def build(dockerd: Dockerd, tag: str, base: str, *steps: str) -> str:
    """A derived image made with the daemon's legacy builder (RUN under plain runc)."""
    dockerfile = f"FROM {base}\n" + "".join(f"RUN {step}\n" for step in steps)
    dockerd.docker(
        "build", "--network", "none", "-q", "-t", tag, "-", input=dockerfile, timeout=300
    )
    return tag


def run_report(dockerd: Dockerd, radium: RadiumEnv, *args: str) -> dict[str, Any]:
    result = dockerd.docker(
        *RUN, "--runtime=radium", *ASK, *args, "python3", "-c", REPORT, check=False
    )
    assert result.returncode == 0, f"{result.stderr}\n{radium.logs()}\n{dockerd.log_tail()}"
    data: dict[str, Any] = json.loads(result.stdout)
    return data


@pytest.mark.parametrize(
    ("suite", "python", "version"),
    [("bullseye", "3.9", "11"), ("bookworm", "3.11", "12"), ("trixie", "3.13", "13")],
)
def test_debian_images_get_the_interposer(
    dockerd: Dockerd, radium: RadiumEnv, suite: str, python: str, version: str
) -> None:
    tag = image(dockerd, suite)
    image_id = dockerd.image_id(tag)
    all_images = dockerd.docker("images", "-aq", "--no-trunc").stdout.split()
    before = mount_table()
    report = run_report(dockerd, radium, tag)
    assert report["python"] == python == images.python_version(suite)
    assert report["platform"]["distro_version"] == version
    assert report["bundle"]["name"] == "glibc-x86_64"
    assert report["module"].startswith("/usr/lib/radium/python/")
    assert (report["ro"], report["nosuid"], report["nodev"]) == (True, True, True)
    # No derived image: the image is as it was, and no new one appeared.
    assert dockerd.image_id(tag) == image_id
    assert dockerd.docker("images", "-aq", "--no-trunc").stdout.split() == all_images
    assert mount_table() == before


def test_alpine_gets_the_musl_bundle(dockerd: Dockerd) -> None:
    result = dockerd.docker(
        *RUN,
        "--runtime=radium",
        *ASK,
        image(dockerd, "alpine"),
        "cat",
        "/usr/lib/radium/manifest.json",
    )
    manifest = json.loads(result.stdout)
    assert (manifest["name"], manifest["libc"]) == ("musl-x86_64", "musl")


def test_read_only_container(dockerd: Dockerd, radium: RadiumEnv) -> None:
    report = run_report(dockerd, radium, "--read-only", image(dockerd, "bookworm"))
    assert report["bundle"]["name"] == "glibc-x86_64"
    touch = dockerd.docker(
        *RUN,
        "--runtime=radium",
        *ASK,
        "--read-only",
        image(dockerd, "bookworm"),
        "touch",
        "/x",
        check=False,
    )
    assert touch.returncode != 0 and "Read-only file system" in touch.stderr


def traced(dockerd: Dockerd, *args: str) -> list[str]:
    """Run through radium-traced; the config.json hashes before and after radium-runtime."""
    result = dockerd.docker("run", "-d", "--network", "none", "--runtime=radium-traced", *args)
    container = result.stdout.strip()
    dockerd.docker("wait", container)
    dockerd.docker("rm", container)
    return [line.split()[1] for line in (dockerd.trace_dir / container).read_text().splitlines()]


def test_container_that_asks_nothing_gets_a_byte_identical_config(dockerd: Dockerd) -> None:
    tag = image(dockerd, "bookworm")
    before, after = traced(dockerd, tag, "true")
    assert before == after
    before, after = traced(dockerd, *ASK, tag, "true")
    assert before != after  # the same instrument sees the edit when there is one


def test_docker_shows_the_wrappers_error(dockerd: Dockerd) -> None:
    result = dockerd.docker(
        *RUN,
        "--runtime=radium",
        "-e",
        "RADIUM_GPUS=lots",
        image(dockerd, "bookworm"),
        "true",
        check=False,
    )
    assert result.returncode != 0
    assert "RADIUM_GPUS must be a whole number of GPUs (0 or more), got 'lots'" in result.stderr


def test_docker_shows_the_hooks_error_and_nothing_stays_mounted(
    dockerd: Dockerd, radium: RadiumEnv
) -> None:
    tag = build(
        dockerd,
        "radium-test/pth-is-a-dir",
        image(dockerd, "bookworm"),
        "mkdir /usr/lib/python3/dist-packages/radium.pth",
    )
    before = mount_table()
    result = dockerd.docker(*RUN, "--runtime=radium", *ASK, tag, "true", check=False)
    assert result.returncode != 0
    assert (
        "radium-hook: /usr/lib/python3/dist-packages/radium.pth exists in the image"
        " but is not a regular file" in result.stderr
    )
    assert mount_table() == before
    assert list(radium.state_dir.iterdir()) == []
