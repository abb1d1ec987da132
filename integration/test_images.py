"""`radium images add|ls|rm` for real: a local registry, acceptors each with its own dockerd in
its own network namespace, pulling through their engine and reporting progress to the pool."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration import images
from integration.dockerd import Dockerd
from integration.netns import Network
from integration.pool import wait_until
from integration.radium_env import RadiumEnv
from integration.site import RADIUM_CLI, Site, open_site
from integration.test_leases import stop_agent

ACCEPTORS = ("img-acc-a", "img-acc-b")


@pytest.fixture(scope="module")
def site(
    network: Network, radium: RadiumEnv, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Site]:
    with open_site(network, radium, tmp_path_factory.mktemp("images"), ACCEPTORS) as opened:
        yield opened


@pytest.fixture(scope="module")
def pushed(site: Site, dockerd: Dockerd) -> str:
    """An image in the registry, pushed by a client dockerd of this namespace."""
    ref = f"localhost:{site.port}/radium-test/bookworm:v1"
    dockerd.import_image(images.debian_tar("bookworm"), ref)
    push = dockerd.docker("push", ref, check=False, timeout=600)
    assert push.returncode == 0, push.stderr
    return ref


def listing(site: Site) -> list[dict[str, str]]:
    done = site.radium("images", "ls", "--json")
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, str]] = json.loads(done.stdout)
    return rows


def test_add_pulls_on_every_acceptor_and_ls_shows_digests(site: Site, pushed: str) -> None:
    done = site.radium("images", "add", pushed)
    assert done.returncode == 0, done.stdout + done.stderr
    table = done.stdout.splitlines()
    final = {line.split()[0]: line.split()[1:] for line in table[table.index(next(
        line for line in table if line.startswith("ACCEPTOR"))) + 1:]}  # fmt: skip
    assert set(final) == set(ACCEPTORS)
    digests = {row[1] for row in final.values()}
    assert all(row[0] == "ready" for row in final.values())
    assert len(digests) == 1 and next(iter(digests)).startswith("sha256:")
    # Progress lines came before the table (one per state change when not a terminal).
    assert any("pulling" in line for line in table), done.stdout
    rows = [r for r in listing(site) if r["ref"] == pushed]
    assert {r["acceptor"]: (r["state"], r["digest"]) for r in rows} == {
        name: ("ready", next(iter(digests))) for name in ACCEPTORS
    }
    for name in ACCEPTORS:  # really in each acceptor's own engine
        inspect = site.dockerds[name].docker("image", "inspect", pushed, check=False)
        assert inspect.returncode == 0, inspect.stderr


def test_an_acceptor_joining_later_pulls_registered_images(site: Site, pushed: str) -> None:
    site.add_acceptor("img-acc-late")

    def ready() -> bool:
        rows = {r["acceptor"]: r for r in listing(site) if r["ref"] == pushed}
        return rows.get("img-acc-late", {}).get("state") == "ready"

    wait_until(ready, 300, "the late acceptor to pull the registered image")
    assert (
        site.dockerds["img-acc-late"].docker("image", "inspect", pushed, check=False).returncode
        == 0
    )


def test_an_unknown_image_fails_with_the_registry_reason(site: Site) -> None:
    ref = f"localhost:{site.port}/radium-test/nope:v1"
    done = site.radium("images", "add", ref)
    assert done.returncode == 1
    failed = [
        line
        for line in done.stdout.splitlines()
        if line.startswith("img-acc-") and " failed " in line
    ]
    assert len(failed) >= len(ACCEPTORS), done.stdout
    assert all("manifest unknown" in line or "not found" in line for line in failed), done.stdout


def test_rm_removes_it_everywhere(site: Site, pushed: str) -> None:
    done = site.radium("images", "rm", pushed)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not [r for r in listing(site) if r["ref"] == pushed]
    for name, daemon in site.dockerds.items():
        assert daemon.docker("image", "inspect", pushed, check=False).returncode != 0, name
    again = site.radium("images", "rm", pushed)
    assert again.returncode == 1
    assert f"image {pushed} is not registered" in again.stderr


PROBE = """
import platform, socket, numpy
print(type(platform).__name__, type(numpy.linalg).__name__)
release = platform.freedesktop_os_release()
remote_host = platform.node()
print(release["VERSION_CODENAME"], platform.python_version(), remote_host != socket.gethostname())
print(round(float(numpy.linalg.det(numpy.eye(2) * 3)), 6))
"""


@pytest.fixture(scope="module")
def client(site: Site, radium: RadiumEnv) -> Iterator[tuple[Dockerd, dict[str, str]]]:
    """This node: a dockerd whose radium runtime leases from the site's pool (agent on)."""
    config = radium.client_config(
        "images-client.toml", site.cluster.client_table(), site.root / "agent"
    )
    daemon = Dockerd({"radium": radium.runtime}, radium.environ(config))
    try:
        daemon.start()
        yield daemon, {**radium.environ(config), "DOCKER_HOST": f"unix://{daemon.socket}"}
    finally:
        daemon.stop()
        stop_agent(config)


@pytest.fixture(scope="module")
def trixie(site: Site, client: tuple[Dockerd, dict[str, str]]) -> str:
    """Debian trixie with numpy, registered: every acceptor holds it."""
    daemon, _ = client
    ref = f"localhost:{site.port}/radium-test/trixie-numpy:v1"
    daemon.import_image(images.debian_tar("trixie", with_numpy=True), ref)
    assert daemon.docker("push", ref, check=False, timeout=600).returncode == 0
    added = site.radium("images", "add", ref)
    assert added.returncode == 0, added.stdout + added.stderr
    return ref


def radium_run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [RADIUM_CLI, "run", "--gpus", "1", "--remote", "numpy.linalg", "--remote", "platform",
         *args, "python3", "-c", PROBE],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def test_container_mode_worker_runs_inside_the_image(
    site: Site, client: tuple[Dockerd, dict[str, str]], trixie: str
) -> None:
    host = Path("/etc/os-release").read_text()
    assert "VERSION_CODENAME=trixie" not in host, "the acceptor host must not be trixie itself"
    done = radium_run(client[1], "-v", "--", "--rm", "--network", "none", trixie)
    assert done.returncode == 0, done.stdout + done.stderr
    kinds, where, det = done.stdout.splitlines()
    assert kinds == "RemoteModule RemoteModule"
    codename, version, other_host = where.split()
    # The worker's os-release and Python are the image's (trixie, 3.13), not the host's.
    assert codename == "trixie"
    assert version.startswith(images.python_version("trixie") + ".")
    assert other_host == "True"  # and it is not the client container itself
    assert det == "9.0"
    assert "lease l-" in done.stderr
    logs = "".join(a.log.read_text() for a in site.cluster.acceptors.values())
    assert "worker runs in container radium-worker-" in logs and trixie in logs


def test_worker_process_selects_process_mode(
    site: Site, client: tuple[Dockerd, dict[str, str]], trixie: str
) -> None:
    done = radium_run(client[1], "--worker", "process", "--", "--rm", "--network", "none", trixie)
    assert done.returncode == 0, done.stdout + done.stderr
    codename, version, _ = done.stdout.splitlines()[1].split()
    # The acceptor's own Python: this test process's.
    assert version == ".".join(map(str, sys.version_info[:3]))
    assert codename != "trixie"
