"""``radium exec`` refused for capacity, through the real CLI, agent, pool and acceptor: the one
line says what is free now and how to wait for more (issue 35, item 12)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from integration.pool import serving
from integration.radium_env import RadiumEnv
from integration.test_leases import stop_agent

RADIUM_CLI = str(Path(sys.executable).parent / "radium")
FREE = r"1 matching GPU wholly free, at most \d+ MiB free on one"
WAIT = re.escape("--wait SECONDS (RADIUM_WAIT, radium.io/wait; up to 3600)")


def test_no_capacity_says_what_is_free_and_how_to_wait(radium: RadiumEnv, tmp_path: Path) -> None:
    (tmp_path / "pool").mkdir()
    with serving(tmp_path / "pool", devices=2) as cluster:
        config = radium.client_config("capacity.toml", cluster.client_table(), tmp_path / "agent")
        cluster.client().allocate(gpus=1, holder="busy")  # one of the two devices
        try:
            lines = [
                exec_refused(radium, config, *wait)
                for wait in ((), ("--wait", "0.5"), ())  # the last: after a wait ran out
            ]
        finally:
            stop_agent(config)
    now = rf"radium: no capacity for 2 whole GPUs: {FREE}; ask for what is free, or wait for it: "
    assert re.fullmatch(now + WAIT, lines[0]), lines[0]
    within = rf"radium: no capacity for 2 whole GPUs within 0.5s: {FREE}; ask for what is free, "
    assert re.fullmatch(within + "or wait longer: " + WAIT, lines[1]), lines[1]
    assert lines[2] == lines[0]


def exec_refused(radium: RadiumEnv, config: Path, *options: str) -> str:
    """The one line ``radium exec --gpus 2`` is refused with."""
    done = subprocess.run(
        [RADIUM_CLI, "exec", "--gpus", "2", *options, "--remote", "numpy", "--", "true"],
        env=radium.environ(config),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
    return done.stderr.strip()
