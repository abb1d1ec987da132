"""A private Radium installation for one test session: bundles, config, state and log dirs."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class RadiumEnv:
    root: Path
    config: Path
    bundles: Path
    state_dir: Path
    hook_log: Path
    runtime_log: Path
    runtime: Path

    def environ(self, config: Path | None = None) -> dict[str, str]:
        return {"PATH": os.environ["PATH"], "RADIUM_CONFIG": str(config or self.config)}

    def write_config(self, name: str, extra: str = "", *, bundles_dir: Path | None = None) -> Path:
        """A config file under root; ``extra`` holds more lines for its [hook] table."""
        path = self.root / name
        path.write_text(
            f'[bundles]\ndir = "{bundles_dir or self.bundles}"\n'
            f'[hook]\nstate_dir = "{self.state_dir}"\nlog_file = "{self.hook_log}"\n{extra}'
            f'[runtime]\nlog_file = "{self.runtime_log}"\n'
        )
        return path

    def client_config(
        self, name: str, client: str, agent: Path | None = None, node: str = ""
    ) -> Path:
        """A config whose CLI reaches the pool of ``client`` (its ``[client]`` table, see
        ``PoolCluster.client_table``) and, with ``agent`` (a directory), whose hook leases
        through a node agent living there."""
        text = client
        if agent is not None:
            text += (
                f'[agent]\nenabled = true\nsocket = "{agent}/agent.sock"\n'
                f'state_file = "{agent}/state.json"\nlog_file = "{agent}/agent.log"\n'
            )
            text += f'node = "{node}"\n' if node else ""
        config = self.write_config(name)
        config.write_text(config.read_text() + text)
        return config

    def logs(self) -> str:
        """Both log files, for assertion messages."""
        parts = []
        for log in (self.hook_log, self.runtime_log):
            if log.exists():
                parts.append(f"--- {log.name}\n" + "\n".join(log.read_text().splitlines()[-30:]))
        return "\n".join(parts)


def make_env(root: Path, scripts: Path | None = None) -> RadiumEnv:
    """Build bundles and write a config under ``root``, for the Radium installed in ``scripts``
    (a virtualenv's bin directory; default: this interpreter's)."""
    scripts = scripts or Path(sys.executable).parent
    runtime = scripts / "radium-runtime"
    if not runtime.exists():
        pytest.fail(f"{runtime} is missing: install Radium with pip install -e .", pytrace=False)
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [str(scripts / "radium"), "bundles", "build", "--out", str(root / "bundles")],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    env = RadiumEnv(
        root=root,
        config=root / "config.toml",
        bundles=root / "bundles",
        state_dir=root / "state",
        hook_log=root / "hook.log",
        runtime_log=root / "runtime.log",
        runtime=runtime,
    )
    env.write_config("config.toml")
    return env


def radium_setup(radium: RadiumEnv, *args: str) -> str:
    """``radium setup ARGS`` of this installation, which must succeed; its output."""
    cli = radium.runtime.parent / "radium"
    result = subprocess.run(
        [str(cli), "setup", *args],
        capture_output=True,
        text=True,
        env=radium.environ(),
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout
