"""A container's start and stop, written once (radium.hooks.stages), driven by both runners.

Each case runs the stage under the hook's synchronous runner and under the agent's
asynchronous one with the same scripted steps, and both must do the same thing.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Callable

import pytest

from radium.configstart import HookConfig
from radium.configtree import Config
from radium.errors import CapacityError, MountError
from radium.hooks import cleanup, stages
from radium.hooks.state import parse_state


class Script:
    """Does each step by name, records the order, fails the step named in ``fail``."""

    def __init__(self, fail: str = "", leased: bool = True) -> None:
        self.fail, self.leased = fail, leased
        self.done: list[str] = []

    def do(self, step: stages.Step) -> bool:
        name = type(step).__name__
        self.done.append(name if not isinstance(step, stages.Release) else f"Release:{step.why}")
        if name == self.fail:
            raise (MountError if name == "Mount" else CapacityError)(f"{name} failed")
        return self.leased if isinstance(step, stages.Lease) else False

    async def do_async(self, step: stages.Step) -> bool:
        await asyncio.sleep(0)
        return self.do(step)


def sync_run(steps: stages.Steps, script: Script) -> None:
    stages.run(steps, script.do)


def async_run(steps: stages.Steps, script: Script) -> None:
    asyncio.run(stages.run_async(steps, script.do_async))


RUNNERS = pytest.mark.parametrize("runner", [sync_run, async_run], ids=["hook", "agent"])


def setup(tmp_path: Path) -> tuple[Config, bytes]:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "config.json").write_text(json.dumps({"ociVersion": "1.0.2"}))
    state = {"ociVersion": "1.0.2", "id": "c1", "pid": 4242, "bundle": str(bundle)}
    return Config(hook=HookConfig(state_dir=str(tmp_path / "containers"))), json.dumps(
        state
    ).encode()


@RUNNERS
def test_prestart_makes_the_directory_then_leases_then_mounts(
    tmp_path: Path, runner: Callable[[stages.Steps, Script], None]
) -> None:
    config, raw = setup(tmp_path)
    script = Script()
    runner(stages.prestart(parse_state(raw), config), script)
    assert script.done == ["Lease", "Mount"]
    assert (tmp_path / "containers" / "c1").is_dir()


@RUNNERS
@pytest.mark.parametrize(
    ("fail", "leased", "done"),
    [
        ("Mount", True, ["Lease", "Mount", "Release:its start failed"]),
        ("Mount", False, ["Lease", "Mount"]),  # nothing held: nothing to give back
        ("Lease", True, ["Lease"]),
    ],
)
def test_a_failed_step_undoes_what_was_made_and_raises_its_error(
    tmp_path: Path,
    runner: Callable[[stages.Steps, Script], None],
    fail: str,
    leased: bool,
    done: list[str],
) -> None:
    config, raw = setup(tmp_path)
    script = Script(fail, leased)
    with pytest.raises((MountError, CapacityError), match=f"{fail} failed"):
        runner(stages.prestart(parse_state(raw), config), script)
    assert script.done == done
    assert not (tmp_path / "containers" / "c1").exists()


def test_forgetting_a_container_removes_its_directory_and_repeats_safely(tmp_path: Path) -> None:
    config, raw = setup(tmp_path)
    stages.run(stages.prestart(parse_state(raw), config), Script().do)
    assert (tmp_path / "containers" / "c1").is_dir()
    for _ in range(2):
        cleanup.forget(config, "c1", "deleted")
        assert not (tmp_path / "containers" / "c1").exists()
