"""The agent's mount helper as a real process: its answers, and its death, seen by the agent.

Real mounts into real containers are in integration/test_leases.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from radium.agent.mounthelper import MountHelper
from radium.errors import MountError, RadiumError, UnavailableError


def gone_pid() -> int:
    """A pid no process has (a container that exited before its prestart)."""
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


@pytest.fixture
def helper_env(tmp_path: Path) -> dict[str, str]:
    config = tmp_path / "radium.toml"
    config.write_text(f'[hook]\nstate_dir = "{tmp_path}/state"\nlog_file = "{tmp_path}/hook.log"\n')
    return {"PATH": os.environ["PATH"], "RADIUM_CONFIG": str(config)}


def state_of(tmp_path: Path, pid: int) -> bytes:
    bundle = tmp_path / "bundle"
    (bundle / "rootfs").mkdir(parents=True, exist_ok=True)
    (bundle / "config.json").write_text(json.dumps({"root": {"path": "rootfs"}}))
    return json.dumps({"id": "c1", "pid": pid, "bundle": str(bundle)}).encode()


def test_the_helpers_error_reaches_the_agent_with_its_kind_and_hint(
    tmp_path: Path, helper_env: dict[str, str]
) -> None:
    async def scenario() -> None:
        helper = MountHelper(helper_env)
        await helper.start()
        try:
            with pytest.raises(RadiumError) as raised:
                await helper.mount_bundle(state_of(tmp_path, gone_pid()), str(tmp_path / "run"))
            assert raised.value.kind == MountError.kind
            assert "cannot open the mount namespace of container process" in raised.value.message
            assert raised.value.hint == "the container exited before its prestart hook ran"
        finally:
            await helper.close()

    asyncio.run(scenario())


def test_a_helper_that_died_or_hung_is_replaced(
    tmp_path: Path, helper_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("radium.agent.mounthelper.MOUNT_TIMEOUT", 1.0)

    async def scenario() -> None:
        helper = MountHelper(helper_env)
        await helper.start()
        try:
            process = helper._process
            assert process is not None
            os.kill(process.pid, signal.SIGKILL)
            await process.wait()
            # Noticed at the next call: a new helper answers it.
            with pytest.raises(RadiumError, match="cannot open the mount namespace"):
                await helper.mount_bundle(state_of(tmp_path, gone_pid()), str(tmp_path / "run"))
            assert helper._process is not None and helper._process.pid != process.pid
            os.kill(helper._process.pid, signal.SIGSTOP)  # hung now: one start fails
            with pytest.raises(UnavailableError):
                await asyncio.wait_for(
                    helper.mount_bundle(state_of(tmp_path, gone_pid()), str(tmp_path / "run")), 60
                )
            with pytest.raises(RadiumError, match="cannot open the mount namespace"):
                await helper.mount_bundle(state_of(tmp_path, gone_pid()), str(tmp_path / "run"))
        finally:
            await helper.close()

    asyncio.run(scenario())


WARMED = """
import re, sys
from pathlib import Path
from radium.hooks import detect, safepath
from radium.agent import mounthelper
from tests.distro_roots import build_root, root_by_name

root = Path(sys.argv[1])
build_root(root_by_name("debian-12"), root)
if sys.argv[2] == "warm":
    mounthelper._warm_up()
modules, patterns = set(sys.modules), len(re._cache)
fd = safepath.open_root(root)
found = detect.detect(fd, Path(sys.argv[1] + "-scratch"))
assert found.distro_id == "debian", found
print(sorted(set(sys.modules) - modules), len(re._cache) - patterns)
"""


@pytest.mark.parametrize("warm", [True, False])
def test_the_warm_up_loads_before_the_fork_what_detection_would_load_in_each_child(
    tmp_path: Path, warm: bool
) -> None:
    """What a child of the helper still has to import or compile, after and without it."""
    done = subprocess.run(
        [sys.executable, "-c", WARMED, str(tmp_path / "root"), "warm" if warm else "cold"],
        capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    left = done.stdout.strip()
    assert (left == "[] 0") == warm, left


FROZEN = """
import gc, sys
from radium.agent import mounthelper
mounthelper.main()  # its stdin is empty: it warms up, freezes, and returns
print(gc.get_freeze_count())
"""


def test_the_helper_freezes_what_its_children_inherit_before_it_serves(tmp_path: Path) -> None:
    """A child's collection would walk the whole inherited heap (copying each page it touches):
    the helper's objects are frozen before the first fork."""
    config = tmp_path / "radium.toml"
    config.write_text(f'[hook]\nlog_file = "{tmp_path / "hook.log"}"\n')
    done = subprocess.run(
        [sys.executable, "-c", FROZEN], stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=60, env={"PATH": os.environ["PATH"], "RADIUM_CONFIG": str(config)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.strip()) > 10_000  # every module's objects, not a handful
