"""The prestart stage: put the bundle into a container.

Prestart runs after the runtime has built the container's mount namespace and before it pivots
into the rootfs. We join that namespace, so every mount we make belongs to the container alone
and vanishes with it: the host's mount table never changes.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Mapping

from radium.configtree import Config
from radium.errors import NoBundleError, NoPythonError, RadiumError, UnsafePathError
from radium.hooks import detect, mounts, rules, safepath, stages
from radium.hooks.cleanup import release
from radium.hooks.state import State, rootfs_path
from radium.ocispec import read as load_spec
from radium.packaging import manifest as bundle_manifest

__all__ = ["INFO_NAME", "PTH_NAME", "Mounter", "mount_bundle", "prestart"]

log = logging.getLogger(__name__)

PTH_NAME = "radium.pth"
INFO_NAME = "info.json"
_BUNDLE_FLAGS = mounts.MS_RDONLY | mounts.MS_NOSUID | mounts.MS_NODEV
_RUNTIME_DIR_FLAGS = _BUNDLE_FLAGS | mounts.MS_NOEXEC


class Mounter:
    """Bind mounts into the rootfs behind ``root_fd``, all undone unless :meth:`commit` ran."""

    def __init__(self, root_fd: int) -> None:
        self._root_fd = root_fd
        self._done: list[int] = []
        self._committed = False

    def __enter__(self) -> Mounter:
        return self

    def bind(self, source: Path, target: str, kind: Literal["dir", "file"], flags: int) -> None:
        """Bind ``source`` (host) read-only at ``target`` (inside the container)."""
        with safepath.opened(self._root_fd, target, create=kind) as fd:
            mode = os.fstat(fd).st_mode
            if (stat.S_ISDIR(mode), stat.S_ISREG(mode)) != (kind == "dir", kind == "file"):
                expected = "directory" if kind == "dir" else "regular file"
                raise UnsafePathError(
                    f"{target} exists in the image but is not a {expected}",
                    hint="the image conflicts with Radium's mount paths (see hook.bundle_target)",
                )
            mounts.bind(str(source), safepath.fd_path(fd))
        # Re-resolve: the new mount now sits on top of the path, and it is what must be remounted.
        top = safepath.open_in_root(self._root_fd, target)
        self._done.append(top)
        mounts.remount(safepath.fd_path(top), flags)
        log.info("mounted %s at %s", source, target)

    def commit(self) -> None:
        self._committed = True

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for fd in reversed(self._done):
            if not self._committed:
                try:
                    mounts.unmount(safepath.fd_path(fd))
                except RadiumError as err:
                    log.error("undoing a mount after a failure: %s", err.message)
            os.close(fd)


def prestart(state: State, config: Config) -> None:
    """The hook's prestart: :func:`radium.hooks.stages.prestart`'s steps, done in this process."""
    spec = load_spec(state.bundle)  # read once: the runtime dir's owner, then the mounts

    def do(step: stages.Step) -> bool:
        if isinstance(step, stages.Lease):
            # Before joining the container's mount namespace: the agent lives in the host's.
            return config.agent.enabled and _acquire(state, config, Path(step.host_dir))
        if isinstance(step, stages.Mount):
            mount_bundle(state, config, Path(step.host_dir), spec)
        else:
            release(state, config)
        return False

    stages.run(stages.prestart(state, config, spec), do)


def mount_bundle(
    state: State, config: Config, host_dir: Path, spec: Mapping[str, Any] | None = None
) -> None:
    """Detect the image, pick its bundle, mount bundle, runtime dir and ``.pth``.

    It joins the container's mount namespace, so it runs in a process of its own: the hook, or
    a child of the node agent's mount helper (a process with threads cannot join one).
    """
    spec = load_spec(state.bundle) if spec is None else spec
    rootfs = Path(rootfs_path(state, spec))
    selection_rules = rules.load_rules(config.bundles.rules)
    mounts.enter_mount_namespace(state.pid)
    root_fd = safepath.open_root(rootfs)
    try:
        _inject(state, config, root_fd, host_dir, selection_rules)
    finally:
        os.close(root_fd)


def _acquire(state: State, config: Config, host_dir: Path) -> bool:
    """Get the container's lease through the node agent (started on demand); True when held."""
    from radium import agentclient
    from radium.shim.request import wait_seconds

    request = state.radium_annotations
    wait = wait_seconds(request)
    lease = agentclient.acquire(config, state.container_id, state.pid, request, str(host_dir), wait)
    if lease:
        log.info(
            "container %s: lease %s on %s",
            state.container_id,
            lease.get("id"),
            lease.get("acceptor"),
        )
    return bool(lease)


def _inject(
    state: State,
    config: Config,
    root_fd: int,
    host_dir: Path,
    selection_rules: tuple[rules.Rule, ...],
) -> None:
    found = detect.detect(root_fd, host_dir / ".release")
    name = rules.select(selection_rules, found)
    bundle_dir = Path(config.bundles.dir) / name
    manifest = bundle_manifest.read(bundle_dir)
    if found.arch != manifest.get("arch"):
        raise NoBundleError(
            f"bundle {name} is for {manifest.get('arch')}, the image is {found.arch}",
            hint="fix the bundle rules or build a bundle for this architecture",
        )
    log.info(
        "container %s: %s %s, %s/%s, pythons %s -> bundle %s",
        state.container_id,
        found.distro_id,
        found.distro_version,
        found.libc,
        found.arch,
        [p.version for p in found.pythons],
        name,
    )
    if not found.pythons:
        if config.hook.no_python == "fail":
            raise NoPythonError(
                f"image of container {state.container_id} has no Python interpreter",
                hint='use an image with python3, or set hook.no_python = "start"',
            )
        log.warning(
            "container %s has no Python: starting without the interposer", state.container_id
        )
    _write_runtime_files(state, config, host_dir, found, manifest)
    with Mounter(root_fd) as mounter:
        mounter.bind(bundle_dir, config.hook.bundle_target, "dir", _BUNDLE_FLAGS)
        mounter.bind(host_dir, config.hook.runtime_target, "dir", _RUNTIME_DIR_FLAGS)
        for site in found.site_dirs:
            mounter.bind(host_dir / PTH_NAME, f"{site}/{PTH_NAME}", "file", _BUNDLE_FLAGS)
        mounter.commit()


def _write_runtime_files(
    state: State, config: Config, host_dir: Path, found: detect.Platform, manifest: dict[str, Any]
) -> None:
    info = {
        "container_id": state.container_id,
        "bundle": {
            k: manifest.get(k) for k in ("name", "version", "libc", "arch", "content_sha256")
        },
        "bundle_path": config.hook.bundle_target,
        "platform": found.to_dict(),
        "request": state.radium_annotations,
    }
    (host_dir / INFO_NAME).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    # A path line puts the bundle's Python code on sys.path of every interpreter of the image;
    # the import line activates remoting (it costs a getenv when nothing is to be remoted).
    pth = (
        f"{config.hook.bundle_target.rstrip('/')}/{bundle_manifest.PYTHON_DIR}\n"
        "import radium_interposer.boot\n"
    )
    (host_dir / PTH_NAME).write_text(pth, encoding="utf-8")
