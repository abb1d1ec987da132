"""The config sections of a container's start (``[bundles]``, ``[hook]``, ``[runtime]`` and
``[shim]`` of :class:`radium.configtree.Config`): where the client bundles live, and what the
hook, the runtime wrapper and the containerd shim do. Declared as the rest of the tree is:
frozen, complete defaults, bounds on their fields; and, like it, without postponed annotations
(:func:`radium.bounds.checked` reads them as objects).
"""

from dataclasses import dataclass
from typing import Literal

from radium.bounds import AbsolutePath

__all__ = ["BundlesConfig", "HookConfig", "RuntimeConfig", "ShimConfig"]


@dataclass(frozen=True)
class BundlesConfig:
    """Where the per-platform client bundles live and how one is chosen."""

    dir: AbsolutePath = "/usr/lib/radium/bundles"
    #: TOML file of selection rules; empty means the rules shipped with Radium.
    rules: str = ""


@dataclass(frozen=True)
class HookConfig:
    """What ``radium-hook`` does inside a container."""

    log_file: str = "/var/log/radium/hook.log"
    #: Host directory holding one runtime directory per container.
    state_dir: AbsolutePath = "/run/radium/containers"
    #: Where the selected bundle appears inside the container (read-only).
    bundle_target: AbsolutePath = "/usr/lib/radium"
    #: Where the container's runtime directory appears inside the container.
    runtime_target: AbsolutePath = "/run/radium"
    #: An image without Python: "start" it without the interposer (logged) or "fail" the start.
    no_python: Literal["start", "fail"] = "start"


@dataclass(frozen=True)
class RuntimeConfig:
    """What ``radium-runtime`` execs and where it logs."""

    #: Low-level OCI runtimes to try, in order: names looked up in PATH, or absolute paths.
    runtimes: tuple[str, ...] = ("runc", "crun")
    log_file: str = "/var/log/radium/runtime.log"
    #: The hook command put into config.json; empty means this installation's radium-hook.
    hook_command: tuple[str, ...] = ()


@dataclass(frozen=True)
class ShimConfig:
    """What ``containerd-shim-radium-v2`` execs and where it logs (it may print nothing)."""

    #: The containerd shim that does the real work: a name looked up in PATH, or a path.
    runc_shim: str = "containerd-shim-runc-v2"
    log_file: str = "/var/log/radium/shim.log"
