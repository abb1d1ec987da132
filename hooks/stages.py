"""A Radium container's start, written once for both processes that run it (its stop is two
plain steps: the lease given back, then :func:`radium.hooks.cleanup.forget`).

Which step comes after which, and what is undone when one fails, is the same whoever does the
work: the hook (synchronous, a process of its own per stage) or the node agent (asynchronous,
on its loop, the mount done by its helper). So each stage is a generator of *steps*, and each
runner does the steps its own way (:func:`run`, :func:`run_async`): ``leased = yield
Lease(dir)`` asks the runner for the lease and gets back whether one is held; a step that
fails is thrown back in at its ``yield``, where the stage undoes what it made, then re-raises.
Light on imports: the hook runs it as every container starts.
"""

from __future__ import annotations

import shutil

from radium.errors import SpecError
from radium.hooks import rundir
from radium.ocispec import read as load_spec

# Not typing.TYPE_CHECKING: importing typing costs milliseconds on every container start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any, Awaitable, Callable, Generator, Mapping, Union

    from radium.configtree import Config
    from radium.hooks.state import State

    Step = Union["Lease", "Mount", "Release"]
    Steps = Generator[Step, bool, None]

__all__ = [
    "Lease",
    "Mount",
    "Release",
    "make_runtime_dir",
    "prestart",
    "run",
    "run_async",
]


class Lease:
    """Take the container's lease (its files go to ``host_dir``); answer whether one is held."""

    __slots__ = ("host_dir",)

    def __init__(self, host_dir: str) -> None:
        self.host_dir = host_dir


class Mount:
    """Mount the bundle, ``host_dir`` and the ``.pth`` into the container."""

    __slots__ = ("host_dir",)

    def __init__(self, host_dir: str) -> None:
        self.host_dir = host_dir


class Release:
    """Give the container's lease back (none held is no error); ``why`` goes to the log."""

    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why


def make_runtime_dir(state: State, config: Config, spec: Mapping[str, Any] | None = None) -> Path:
    """The container's host directory, created if need be: reachable by the container's own
    user only (:mod:`radium.hooks.rundir`)."""
    from pathlib import Path

    if state.pid <= 0:
        raise SpecError("OCI state has no container pid", hint="run radium-hook as a prestart hook")
    owner = rundir.container_owner(load_spec(state.bundle) if spec is None else spec)
    return Path(rundir.make(config.hook.state_dir, state.container_id, owner))


def prestart(state: State, config: Config, spec: Mapping[str, Any] | None = None) -> Steps:
    """The runtime directory, the lease, the mounts; on any failure nothing is kept."""
    host_dir = str(make_runtime_dir(state, config, spec))
    leased = False
    try:
        leased = yield Lease(host_dir)
        yield Mount(host_dir)
    except BaseException:
        shutil.rmtree(host_dir, ignore_errors=True)
        if leased:
            yield Release("its start failed")
        raise


def run(steps: Steps, do: Callable[[Step], bool]) -> None:
    """Run a stage whose steps ``do`` performs synchronously (the hook).

    :func:`run_async`'s loop, with no event loop: a coroutine that never suspends finishes at
    its first ``send``, so the order of steps and undos is one piece of code for both runners.
    """

    async def do_now(step: Step) -> bool:
        return do(step)

    stage = run_async(steps, do_now)
    try:
        stage.send(None)
    except StopIteration:
        return
    stage.close()
    raise RuntimeError("a synchronous step of a container's stage suspended")


async def run_async(steps: Steps, do: Callable[[Step], Awaitable[bool]]) -> None:
    """Run a stage whose steps ``do`` performs on an event loop (the node agent)."""
    try:
        step = next(steps)
        while True:
            try:
                answer = await do(step)
            except BaseException as exc:
                step = steps.throw(exc)
            else:
                step = steps.send(answer)
    except StopIteration:
        pass
