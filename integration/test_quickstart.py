"""The README's quickstart, run verbatim as a new user would (with a `sudo` that is a no-op:
these tests already run as root and this machine has no sudo)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
STATE = "/tmp/radium-quickstart"


def quickstart() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "the README's quickstart has no ```sh block"
    return block.group(1)


def quickstart_processes() -> list[str]:
    """Radium processes of the quickstart's state directory still running."""
    found = []
    for process in psutil.process_iter():
        try:
            if STATE in process.environ().get("RADIUM_CONFIG", ""):
                found.append(" ".join(process.cmdline()))
        except psutil.Error:
            continue
    return found


def test_the_readme_quickstart_works_verbatim(tmp_path: Path) -> None:
    commands = quickstart()
    assert "radium exec --remote numpy" in commands and STATE in commands
    (tmp_path / "sudo").write_text('#!/bin/sh\nexec env "$@"\n')
    (tmp_path / "sudo").chmod(0o755)
    env = {"PATH": f"{tmp_path}:{os.environ['PATH']}", "HOME": str(tmp_path)}
    try:
        done = subprocess.run(
            ["bash", "-euxo", "pipefail", "-c", commands],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr[-3000:]
        assert "inverse ok: True" in done.stdout
        assert "Radium is down: stopped pool, acceptor, agent." in done.stdout
        assert not quickstart_processes()
    finally:
        subprocess.run([str(ROOT / ".venv/bin/radium"), "down", "--state-dir", STATE],
                       capture_output=True, check=False)  # fmt: skip
