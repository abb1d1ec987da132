"""Run containers with real runc through radium-runtime, from a rootfs directory."""

from __future__ import annotations

import json
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from integration.host import need
from integration.radium_env import RadiumEnv


@dataclass
class RuncResult:
    returncode: int
    stdout: str
    stderr: str
    log: str  # runc's --log file (JSON lines), where engines read a runtime's error
    bundle: Path


def make_bundle(
    where: Path,
    rootfs: Path,
    args: list[str],
    env: list[str],
    annotations: dict[str, str] | None = None,
) -> Path:
    """An OCI bundle whose config.json is `runc spec`'s, pointed at ``rootfs``."""
    bundle = where / f"bundle-{uuid.uuid4().hex[:8]}"
    bundle.mkdir(parents=True)
    subprocess.run([need("runc"), "spec", "--bundle", str(bundle)], check=True)
    spec: dict[str, Any] = json.loads((bundle / "config.json").read_text())
    spec["root"] = {"path": str(rootfs), "readonly": False}
    spec["process"]["terminal"] = False
    spec["process"]["args"] = args
    spec["process"]["env"] = [
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        *env,
    ]
    spec["hostname"] = "radium-test"
    if annotations:
        spec["annotations"] = annotations
    (bundle / "config.json").write_text(json.dumps(spec, indent="\t"))
    return bundle


def run(
    radium: RadiumEnv,
    bundle: Path,
    *,
    config: Path | None = None,
    subcommand: str = "run",
) -> RuncResult:
    """``radium-runtime run`` the bundle to completion, then make sure runc forgot it."""
    state_root = radium.root / "runc-root"
    log = bundle / "runc-log.json"
    container_id = bundle.name
    argv = [
        str(radium.runtime),
        "--root",
        str(state_root),
        "--log",
        str(log),
        "--log-format",
        "json",
        subcommand,
        "--bundle",
        str(bundle),
        container_id,
    ]
    try:
        done = subprocess.run(
            argv, env=radium.environ(config), capture_output=True, text=True, timeout=120
        )
    finally:
        subprocess.run(
            [need("runc"), "--root", str(state_root), "delete", "--force", container_id],
            capture_output=True,
            check=False,
        )
    return RuncResult(
        done.returncode, done.stdout, done.stderr, log.read_text() if log.exists() else "", bundle
    )
