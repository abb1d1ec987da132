"""`radium doctor` on a healthy installation, and on each broken part with its fix."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.pool import PoolCluster, free_port
from integration.radium_env import RadiumEnv
from radium.engines.setup import PROGRAMS

RADIUM_CLI = str(Path(sys.executable).parent / "radium")


@pytest.fixture(scope="module")
def installation(
    radium: RadiumEnv, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, Path]]:
    """A pool with an acceptor, a config leasing from it, a daemon.json `radium setup` wrote."""
    root = tmp_path_factory.mktemp("doctor")
    cluster = PoolCluster(root)
    cluster.start_pool()
    cluster.start_acceptor("doctor-acc", devices=1)
    cluster.wait_up("doctor-acc")
    config = radium.client_config("doctor.toml", cluster.client_table())
    daemon_json = root / "daemon.json"
    daemon_json.write_text('{"log-level": "warn"}\n')
    setup = doctor(config, "setup", "docker", "--config", str(daemon_json), command="setup")
    assert setup.returncode == 0, setup.stderr
    try:
        yield config, daemon_json
    finally:
        cluster.stop()


def doctor(config: Path, *args: str, command: str = "doctor") -> subprocess.CompletedProcess[str]:
    argv = [RADIUM_CLI, *args] if command == "setup" else [RADIUM_CLI, "doctor", *args]
    return subprocess.run(
        argv,
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "RADIUM_CONFIG": str(config)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def lines(done: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """Each check's status and detail, by name (its fix line folded in)."""
    result: dict[str, str] = {}
    name = ""
    for line in done.stdout.splitlines():
        if line.startswith(" "):
            result[name] += " | " + line.strip()
        else:
            status, name, detail = line[:5].strip(), line[6:24].strip(), line[25:]
            result[name] = f"{status}: {detail}"
    return result


def test_a_healthy_installation_passes(installation: tuple[Path, Path]) -> None:
    config, daemon_json = installation
    done = doctor(config, "--engine", "docker", "--docker-config", str(daemon_json))
    checks = lines(done)
    assert done.returncode == 0, done.stdout
    assert set(checks) == {
        "runtime", "programs", "bundles", "engine docker", "agent", "pool", "acceptors"
    }  # fmt: skip
    assert all(v.startswith(("ok:", "skip:")) for v in checks.values()), checks
    assert checks["acceptors"] == "ok: 1 up: doctor-acc"


def test_a_hook_that_is_not_executable(installation: tuple[Path, Path], tmp_path: Path) -> None:
    config, _ = installation
    scripts = tmp_path / "bin"
    scripts.mkdir()
    for name in PROGRAMS:
        shutil.copy2(Path(sys.executable).parent / name, scripts / name)
    (scripts / "radium-hook").chmod(0o644)
    done = doctor(config, "--engine", "docker", "--scripts", str(scripts))
    assert done.returncode == 1
    assert lines(done)["programs"] == (
        f"FAIL: {scripts}/radium-hook is not executable | fix: chmod 755 {scripts}/radium-hook"
    )


def test_a_daemon_json_without_the_runtime(installation: tuple[Path, Path], tmp_path: Path) -> None:
    config, _ = installation
    bare = tmp_path / "daemon.json"
    bare.write_text('{"runtimes": {}}\n')
    done = doctor(config, "--engine", "docker", "--docker-config", str(bare))
    assert done.returncode == 1
    assert lines(done)["engine docker"] == (
        f"FAIL: Radium is not (or not fully) configured in {bare}"
        f" | fix: sudo radium setup docker --config {bare} --restart"
    )


def test_a_pool_that_is_down(installation: tuple[Path, Path], tmp_path: Path) -> None:
    config, daemon_json = installation
    down = tmp_path / "down.toml"
    down.write_text(
        config.read_text().replace(
            "[client]\npool = ", f'[client]\npool = "127.0.0.1:{free_port()}"\n# '
        )
    )
    done = doctor(down, "--engine", "docker", "--docker-config", str(daemon_json))
    assert done.returncode == 1
    pool = lines(done)["pool"]
    assert pool.startswith("FAIL: pool at 127.0.0.1:"), pool
    assert pool.endswith(
        "| fix: start the pool (radium up, or radium pool serve) or fix [client] pool/token"
    )
    assert "acceptors" not in lines(done)
