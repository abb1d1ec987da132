"""What a cold machine shows while it builds (issue 35, item 11): one line per step on stderr,
stdout left clean, for scripts/setup and the image builder (scripts/demo's and scripts/test's
debootstrap). The builder runs for real into a private cache, with a stand-in debootstrap that
says what the real one says (the real one takes minutes and the network); scripts/setup runs
for real on this machine, where everything is installed (it must say so, quickly)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from integration.host import need_root

ROOT = Path(__file__).resolve().parent.parent
#: What debootstrap --variant=minbase says (abridged): many packages per step.
DEBOOTSTRAP = """#!/bin/sh
rootfs=$(eval echo "\\${$(($# - 1))}")
say() { echo "I: $*"; }
say Retrieving InRelease
say Checking Release signature
say Valid Release signature "(key id 4D64FEC119C2029067D6E791F8D2585B8783D481)"
say Retrieving Packages
say Validating Packages
for p in libc6 python3 python3.11 zlib1g; do say Retrieving $p; done
for p in libc6 python3 python3.11 zlib1g; do say Validating $p; done
for p in libc6 python3 python3.11 zlib1g; do say Extracting $p...; done
[ -e "$(dirname "$0")/fail" ] && { echo "E: Couldn't download packages: python3.11" >&2; exit 1; }
mkdir -p "$rootfs/usr/bin" && touch "$rootfs/usr/bin/python3"
say Installing core packages...
for p in libc6 python3 python3.11 zlib1g; do say Configuring $p...; done
say Base system installed successfully.
"""
BUILD = (
    "from integration import images\nprint(images.minbase_tar('bookworm', ['python3'], 'probe'))"
)


def build(tmp_path: Path, fail: bool) -> subprocess.CompletedProcess[str]:
    need_root()
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    (fake / "debootstrap").write_text(DEBOOTSTRAP)
    (fake / "debootstrap").chmod(0o755)
    if fail:  # debootstrap runs with an environment of the builder's: a file says it
        (fake / "fail").touch()
    env = {
        "PATH": f"{fake}:{os.environ['PATH']}",
        "RADIUM_TEST_CACHE": str(tmp_path / "cache"),
    }
    return subprocess.run(
        [sys.executable, "-c", BUILD], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip


def said(stderr: str) -> list[str]:
    """The progress lines, without the seconds each ends with."""
    return [line.rsplit("  (", 1)[0] for line in stderr.splitlines()]


def test_an_image_build_says_each_step_on_stderr(tmp_path: Path) -> None:
    done = build(tmp_path, fail=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{tmp_path / 'cache' / 'probe.tar'}\n"  # stdout: the result only
    lines = said(done.stderr)
    assert lines[0] == (
        "images: building probe: debootstrap of Debian bookworm with python3 "
        "(about 2 minutes the first time)..."
    )
    assert lines[1:-2] == [
        f"images: probe: I: {step}"
        for step in (
            "Retrieving InRelease",
            "Checking Release signature",
            "Valid Release signature (key id 4D64FEC119C2029067D6E791F8D2585B8783D481)",
            "Retrieving Packages",
            "Validating Packages",
            "Retrieving libc6",
            "Validating libc6",
            "Extracting libc6...",
            "Installing core packages...",
            "Configuring libc6...",
            "Base system installed successfully.",
        )
    ]
    assert lines[-2] == "images: probe: packing probe.tar"
    assert lines[-1].startswith(f"images: built {tmp_path / 'cache' / 'probe.tar'} in ")
    assert all(line.endswith("s)") for line in done.stderr.splitlines()[1:-2])  # its seconds


def test_a_failed_image_build_shows_its_error_as_it_comes_and_in_the_failure(
    tmp_path: Path,
) -> None:
    done = build(tmp_path, fail=True)
    assert done.returncode == 1 and done.stdout == ""
    assert "images: probe: E: Couldn't download packages: python3.11" in said(done.stderr)
    last = done.stderr.strip().splitlines()[-1]
    assert last == "E: Couldn't download packages: python3.11", done.stderr  # in the error


def test_scripts_setup_says_each_step_on_stderr_and_nothing_on_stdout() -> None:
    need_root()
    done = subprocess.run(
        [str(ROOT / "scripts/setup")], capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    steps = [line for line in done.stderr.splitlines() if line.startswith("setup: ")]
    assert steps[0].startswith("setup: Debian packages: all ") and steps[0].endswith(" installed")
    assert steps[1] == "setup: Python packages in .venv: up to date (pyproject.toml unchanged)"
    assert steps[2].startswith("setup: the node agent's client in C: ")
    assert steps[3].startswith("setup: done in ")


def test_scripts_demo_says_its_steps_on_stderr_and_keeps_its_transcript_on_stdout() -> None:
    """`sudo scripts/demo` as the README runs it (setup, then the demo): every step it takes
    says so on stderr; stdout is the transcript of what a user would type and see."""
    need_root()
    done = subprocess.run(
        [str(ROOT / "scripts/demo")], env={"PATH": os.environ["PATH"]}, capture_output=True,
        text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    steps = [line for line in done.stderr.splitlines() if line.startswith(("setup: ", "demo: "))]
    assert steps[0].startswith("setup: Debian packages: ")
    assert any(line.startswith("setup: done in ") for line in steps)
    demo = [line for line in steps if line.startswith("demo: ")]
    assert demo[0] == (
        "demo: starting a private dockerd (its own data root and socket) with the radium runtime..."
    )
    assert demo[-1] == "demo: importing the image radium-demo/debian:bookworm into it..."
    assert not [line for line in done.stdout.splitlines() if line.startswith(("setup:", "demo:"))]
    assert "np.allclose(np.linalg.inv(a) @ a, np.eye(1500)) = True" in done.stdout
