"""``scripts/gpu-check --dry-run`` at tiny sizes: the whole orchestration the GPU run does (a
pool, a sandboxed acceptor on the CPU backend, an agent, ``radium exec --remote torch`` from a
Python without torch, two fractional leases at once), so the check is known to work before a
GPU machine is lent. Needs root (the sandbox) and bwrap: a missing one fails, never skips. No
figure is compared with a threshold."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import psutil

from integration.host import need, need_root

ROOT = Path(__file__).resolve().parent.parent
TINY = ["--steps", "10", "--seconds", "0.2", "--size", "32"]
#: Every row of a dry run, in order; the GPU-only judgements are skipped, saying why.
ROWS = {
    "install from .gpu-check": "ok",
    "client Python has no torch": "ok",
    "pool, acceptor, agent up": "ok",
    "device (remoted torch)": "ok",
    "tensor smoke: remoted = local": "ok",
    "first device call after grant": "ok",
    "training: losses remoted = local": "ok",
    "training: step time remoted/local": "ok",
    "fractions: two 0.5 leases at once": "ok",
    "fractions: memory limit enforced": "skip",
    "fraction a alone: held to its share": "skip",
    "fractions: each about half": "skip",
    "fractions: b over its memory, a unharmed": "ok",
    "everything stopped": "ok",
}


def gpu_check(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": sys.executable, "OUT": str(out)}
    return subprocess.run(
        [str(ROOT / "scripts" / "gpu-check"), "--dry-run", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def rows(table: str) -> dict[str, tuple[str, str]]:
    found = {}
    for line in table.splitlines():
        for check in ROWS:
            if line.startswith(check + "  "):
                result, _, figures = line[len(check) :].strip().partition(" ")
                found[check] = (result, figures.strip())
    return found


def leftovers() -> list[int]:
    """Processes of a gpu-check run still here: their command line or config names its
    folder (``/tmp/gpu-check-*``)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        try:
            config = process.environ().get("RADIUM_CONFIG", "")
        except psutil.Error:
            config = ""
        if any("/gpu-check-" in part for part in [*(process.info["cmdline"] or []), config]):
            found.append(process.pid)
    return found


def test_the_dry_run_passes_with_every_row(tmp_path: Path) -> None:
    need_root()
    need("bwrap", "bubblewrap")
    done = gpu_check(tmp_path, *TINY)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.endswith("gpu-check PASSED: 14 rows, 0 failed\n"), done.stdout
    assert (tmp_path / "gpu-check.txt").read_text() == done.stdout
    found = rows(done.stdout)
    assert {check: got[0] for check, got in found.items()} == ROWS, done.stdout
    assert "dry run" in found["fractions: each about half"][1]
    # Figures, not placeholders: the remoted sum is the local one, times are measured.
    assert re.search(r"relative difference 0\.0e\+00", found["tensor smoke: remoted = local"][1])
    assert re.search(r"ratio \d+\.\d+x", found["training: step time remoted/local"][1])
    held = found["fractions: two 0.5 leases at once"][1]
    assert held.count("fraction 0.5 of cpu0") == 2, held
    assert leftovers() == []


def test_a_run_past_its_deadline_fails_and_stops_everything(tmp_path: Path) -> None:
    """Too short a deadline for the services to come up: a FAIL row, exit 1, nothing left."""
    need_root()
    done = gpu_check(tmp_path, *TINY, "--deadline", "0.5")
    assert done.returncode == 1, done.stdout + done.stderr
    found = rows(done.stdout)
    assert re.search(r"^run stopped +FAIL +RuntimeError: ", done.stdout, re.M), done.stdout
    assert found["everything stopped"][0] == "ok", done.stdout
    assert done.stdout.endswith("failed\n") and "FAILED" in done.stdout
    assert (tmp_path / "gpu-check-logs" / "acceptor.log").exists()
    assert leftovers() == []
