"""containerd-shim-radium-v2: containerd's runtime ``io.containerd.radium.v2``.

containerd runs ``<shim> [flags] start`` with the bundle as working directory, reads everything
the process prints as the new shim's socket address, and later runs ``<shim> [flags] delete``
and reads a DeleteResponse from stdout. We edit config.json on ``start`` (the rootfs is still
empty then: only the spec can be changed), clean up on ``delete``, and exec
``containerd-shim-runc-v2`` with the identical argv and stdin for everything, so it owns ttrpc,
pod grouping, IO and events. On success this program prints nothing; logs go to a file.
"""

from __future__ import annotations

import os
import sys

from radium.errors import ConfigError, RadiumError, RuntimeNotFoundError
from radium.shim import passthrough

# Not typing.TYPE_CHECKING: importing typing costs milliseconds on every container start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping, Sequence

    from radium.configtree import Config

__all__ = ["DEFAULT_RUNC_SHIM", "PROGRAM", "delete", "main", "parse", "runc_shim", "start"]

PROGRAM = "containerd-shim-radium-v2"
DEFAULT_RUNC_SHIM = "containerd-shim-runc-v2"
#: Go flag-package flags of the v2 shim that take a value.
_VALUE_FLAGS = frozenset({"namespace", "address", "publish-binary", "id", "bundle", "socket"})


def parse(argv: Sequence[str]) -> tuple[str, dict[str, str]]:
    """(action, flags) from the shim's arguments (without argv[0]); action "" when absent."""
    flags: dict[str, str] = {}
    index = 0
    while index < len(argv):
        arg = argv[index]
        if not arg.startswith("-") or arg in ("-", "--"):
            break
        name, sep, value = arg.lstrip("-").partition("=")
        if name in _VALUE_FLAGS and not sep:
            index += 1
            value = argv[index] if index < len(argv) else ""
        flags[name] = value
        index += 1
    if index < len(argv) and argv[index] == "--":
        index += 1
    return (argv[index] if index < len(argv) else ""), flags


def runc_shim(config: Config | None, environ: Mapping[str, str], self_path: str) -> str:
    """The path of the containerd shim that does the real work, or ``RuntimeNotFoundError``."""
    name = config.shim.runc_shim if config is not None else DEFAULT_RUNC_SHIM
    path = passthrough.find_runtime([name], environ, self_path)
    if path is None:
        raise RuntimeNotFoundError(
            f"{name} is not installed",
            hint="install containerd, or set shim.runc_shim in the Radium config",
        )
    return path


def start(bundle: str, environ: Mapping[str, str]) -> Config | None:
    """Edit the spec of a container that asks for Radium; pod sandboxes never ask
    (:mod:`radium.shim.pods`)."""
    from radium import ocispec
    from radium.shim import specedit

    spec = ocispec.read(bundle)
    return specedit.edit_bundle(bundle, environ, PROGRAM, lambda c: c.shim.log_file, spec)


def delete(bundle: str, container_id: str, environ: Mapping[str, str]) -> Config | None:
    """Release what start took, idempotently: containerd 1.6 calls delete after every removal.

    Containers that never asked for Radium (the bundle's spec says so) cost a JSON parse.
    """
    import logging
    import shutil

    from radium import config as config_module
    from radium import configtree, logs, ocispec
    from radium.shim import request as request_module

    try:
        spec = ocispec.read(bundle)
        if request_module.from_spec(spec, request_module.NOTHING_SET) is None:
            return None
    except RadiumError:
        pass  # no readable spec left: clean up anyway, it is idempotent

    try:
        config = config_module.load(environ=environ)
    except ConfigError:
        config = configtree.Config()  # a broken config must not leave tasks undeletable
    logs.setup(PROGRAM, config.shim.log_file, stderr_level=logging.CRITICAL + 1)
    if container_id and container_id not in (".", "..") and "/" not in container_id:
        shutil.rmtree(os.path.join(config.hook.state_dir, container_id), ignore_errors=True)
    return config


def main(argv: Sequence[str] | None = None) -> int:
    """``containerd-shim-radium-v2``: edit a Radium container's spec, then exec the runc shim."""
    args = list(sys.argv if argv is None else argv)
    action, flags = parse(args[1:])
    environ = os.environ
    try:
        config: Config | None = None
        if action == "start":
            config = start(flags.get("bundle") or os.getcwd(), environ)
        elif action == "delete":
            config = delete(flags.get("bundle") or os.getcwd(), flags.get("id", ""), environ)
        shim = runc_shim(config, environ, args[0])
    except RadiumError as exc:
        # containerd shows a failed start's output; on success we must print nothing at all.
        sys.stderr.write(f"{PROGRAM}: {exc.one_line()}\n")
        return 1
    os.execv(shim, [shim, *args[1:]])
