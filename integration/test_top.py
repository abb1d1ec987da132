"""`radium top` against a real pool and acceptor: the live view in tmux, its snapshot, its JSON.

The lease is allocated straight from the pool (no container, no docker) with a TTL longer
than the tests, so nobody needs to keep it alive.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from integration.host import need
from integration.pool import PoolCluster, free_port
from radium.proto import pool_pb2 as pb

HOLDER = "top-test/holder-1"


@pytest.fixture
def held(tmp_path: Path) -> Iterator[tuple[PoolCluster, pb.Lease]]:
    """A pool, one 2-device CPU acceptor and a lease on half of one of its devices; one per
    test, as one test kills its pool (and two pools at once would share default ports)."""
    (tmp_path / "cluster").mkdir()
    cluster = PoolCluster(tmp_path / "cluster", lease_ttl=60)
    try:
        cluster.start_pool()
        cluster.start_acceptor("top-acc", devices=2)
        cluster.wait_up("top-acc")
        yield cluster, cluster.client().allocate(fraction=0.5, holder=HOLDER, ttl=600)
    finally:
        cluster.stop()


class Tmux:
    """One session of a fixed size on a tmux server of the test's own (its socket in ``root``),
    running ``radium top`` with the cluster's config; ``EXIT=<status>`` lands in a file."""

    def __init__(self, root: Path) -> None:
        self.tmux = need("tmux")
        self.socket = root / "tmux.sock"
        self.name = f"radium-top-{os.getpid()}"
        self.exit_file = root / "top.exit"
        self.env = {k: v for k, v in os.environ.items() if k != "TMUX"}

    def tmux_(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.tmux, "-S", str(self.socket), *args],
            capture_output=True,
            text=True,
            check=check,
            env=self.env,
        )

    def start(self, cluster: PoolCluster, *top_args: str) -> None:
        command = (
            f"RADIUM_CONFIG={shlex.quote(str(cluster.config))} "
            f"{shlex.quote(cluster.cli)} top {' '.join(map(shlex.quote, top_args))}; "
            f"echo EXIT=$? > {shlex.quote(str(self.exit_file))}"
        )
        self.tmux_("new-session", "-d", "-s", self.name, "-x", "200", "-y", "50", command)

    def screen(self) -> str:
        return self.tmux_("capture-pane", "-p", "-t", self.name, check=False).stdout

    def wait_for(self, predicate: Callable[[str], bool], what: str, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if predicate(screen):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"no {what} on the screen after {timeout}s:\n{screen}")
            time.sleep(0.2)

    def quit(self) -> str:
        """Press q; what ``radium top`` exited with, as the pane's shell wrote it."""
        self.tmux_("send-keys", "-t", self.name, "q")
        deadline = time.monotonic() + 3  # q acts at once, not at the next refresh
        while not self.exit_file.exists() or not self.exit_file.read_text().endswith("\n"):
            assert time.monotonic() < deadline, f"q did not end radium top:\n{self.screen()}"
            time.sleep(0.05)
        return self.exit_file.read_text().strip()

    def kill(self) -> None:
        """Ends the session (by its name) and this test's tmux server, however the test went."""
        self.tmux_("kill-session", "-t", self.name, check=False)
        self.tmux_("kill-server", check=False)


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    """Asked for before the pool: a missing tmux fails the test at once, in one line."""
    session = Tmux(tmp_path)
    try:
        yield session
    finally:
        session.kill()


def shows_lease(lease: pb.Lease) -> Callable[[str], bool]:
    """The lease's row (short id, holder, device) and its device's row (its holder, 50%)."""
    device = lease.device_ids[0]

    def shown(screen: str) -> bool:
        return bool(
            re.search(rf"^{lease.id[:10]} +{HOLDER} .* top-acc +{device} +0\.50 ", screen, re.M)
            and re.search(rf"^top-acc +{device} .* 50% .* up +{HOLDER}\s*$", screen, re.M)
        )

    return shown


def test_live_view_shows_the_lease_and_its_device_and_q_exits_0(
    tmux: Tmux, held: tuple[PoolCluster, pb.Lease]
) -> None:
    cluster, lease = held
    tmux.start(cluster)
    screen = tmux.wait_for(shows_lease(lease), f"lease {lease.id} on {lease.device_ids}")
    print(screen)  # pytest -s: what the view looks like
    assert re.search(r"^top-acc +up ", screen, re.M)
    assert "refreshed every 1s; q quits" in screen
    assert tmux.quit() == "EXIT=0"


def test_live_view_shows_a_pool_that_goes_away_and_follows_it_back(
    tmux: Tmux, held: tuple[PoolCluster, pb.Lease]
) -> None:
    cluster, lease = held
    tmux.start(cluster, "--interval", "0.5")
    tmux.wait_for(shows_lease(lease), "lease")
    cluster.pool.kill(signal.SIGKILL)
    lost = tmux.wait_for(lambda s: f"error: pool at {cluster.address}: unavailable" in s, "error")
    print(lost)  # pytest -s: the view of a pool that went away
    assert lease.id[:10] in lost  # the last state read stays on the screen
    cluster.pool.start()  # the same database: the lease comes back with it
    tmux.wait_for(lambda s: "error" not in s and shows_lease(lease)(s), "recovery", 60)
    assert tmux.quit() == "EXIT=0"


def radium(cluster: PoolCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([cluster.cli, *args], env=cluster.env, capture_output=True, text=True)


def test_once_json_is_radium_leases_json(held: tuple[PoolCluster, pb.Lease]) -> None:
    cluster, lease = held
    for _ in range(10):
        # The same pool state: `radium leases --json` answers the same before and after.
        before = json.loads(radium(cluster, "leases", "--json").stdout)
        top = radium(cluster, "top", "--once", "--json")
        after = json.loads(radium(cluster, "leases", "--json").stdout)
        if before == after:
            assert top.returncode == 0, top.stderr
            assert json.loads(top.stdout) == before
            assert [le["id"] for le in before] == [lease.id]
            return
    raise AssertionError("the pool's leases never held still for three commands")


def test_once_prints_a_plain_snapshot(held: tuple[PoolCluster, pb.Lease]) -> None:
    cluster, lease = held
    once = radium(cluster, "top", "--once")
    assert once.returncode == 0 and once.stderr == "", once.stderr
    print(once.stdout)  # pytest -s: the plain snapshot
    assert "\x1b" not in once.stdout  # not a terminal: no colours, no cursor movement
    assert shows_lease(lease)(once.stdout), once.stdout
    piped = radium(cluster, "top")  # stdout is no terminal: the same snapshot, no live view
    assert piped.returncode == 0 and shows_lease(lease)(piped.stdout), piped.stdout


def test_an_unreachable_pool_is_one_line_and_exit_1(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    dead = f"127.0.0.1:{free_port()}"
    config.write_text(f'[client]\npool = "{dead}"\ntoken = "t"\n')
    cli = str(Path(sys.executable).parent / "radium")
    env = {"PATH": os.environ["PATH"], "RADIUM_CONFIG": str(config)}
    for args in (["--once"], ["--once", "--json"], []):
        result = subprocess.run([cli, "top", *args], env=env, capture_output=True, text=True)
        assert result.returncode == 1 and result.stdout == ""
        assert result.stderr.startswith(f"radium: pool at {dead}: unavailable (")
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
