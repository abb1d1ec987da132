"""radium-runtime: a runc-compatible wrapper that edits the spec on create/run, then execs runc.

Every other subcommand (and ``--version``, ``features``) goes straight to the low-level runtime
with the same argv. A container that asks nothing of Radium is not touched: its config.json stays
byte-identical. Errors are JSON (or text) lines in runc's ``--log`` file, which is where docker
and containerd look for the reason a runtime failed, and one line on stderr.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import shutil
import sys
from pathlib import Path
from typing import Mapping, Sequence

from radium.shim import modifiers
from radium.shim.argv import RuncArgs

from radium import config as config_module
from radium import logs, ocispec
from radium.config import Config
from radium.errors import ConfigError, RadiumError, RuntimeNotFoundError

log = logging.getLogger(__name__)
PROGRAM = "radium-runtime"


def find_runtime(config: Config, environ: Mapping[str, str], self_path: str) -> str:
    """The first configured low-level runtime that exists and is not this wrapper."""
    me = os.path.realpath(self_path)
    for candidate in config.runtime.runtimes:
        path = candidate if "/" in candidate else shutil.which(candidate, path=environ.get("PATH"))
        if path and os.access(path, os.X_OK) and os.path.realpath(path) != me:
            return path
    raise RuntimeNotFoundError(
        f"none of the OCI runtimes {list(config.runtime.runtimes)} is installed",
        hint="install runc (apt-get install runc) or set runtime.runtimes in the Radium config",
    )


def edit_bundle(bundle: Path, config: Config, environ: Mapping[str, str]) -> bool:
    """Apply the modifiers to the bundle's config.json; False when the container asked nothing."""
    spec = ocispec.read(bundle)
    edits = modifiers.for_spec(spec, config, environ)
    if edits is None:
        return False
    ocispec.write(bundle, modifiers.apply(spec, edits))
    log.info("bundle %s: Radium hooks and annotations added", bundle)
    return True


def report(args: RuncArgs, message: str) -> None:
    """Tell the engine (runc's --log file) and the user (stderr) what failed."""
    sys.stderr.write(f"{PROGRAM}: {message}\n")
    if not args.log_file:
        return
    now = datetime.datetime.now(datetime.timezone.utc).isoformat()
    if args.log_format == "json":
        line = json.dumps({"level": "error", "msg": f"{PROGRAM}: {message}", "time": now})
    else:
        line = f'time="{now}" level=error msg={json.dumps(PROGRAM + ": " + message)}'
    try:
        with open(args.log_file, "a", encoding="utf-8") as f:
            f.write(line + "\n")
    except OSError as exc:
        sys.stderr.write(f"{PROGRAM}: cannot write to {args.log_file}: {exc.strerror}\n")


def load_config(args: RuncArgs, environ: Mapping[str, str]) -> Config:
    """The config; for pass-through commands a broken one falls back to defaults.

    A bad config must stop new Radium containers, not strand running ones: kill, delete and
    state have to keep working so nothing is lost.
    """
    try:
        return config_module.load(environ=environ)
    except ConfigError as exc:
        if args.edits_spec:
            raise
        sys.stderr.write(
            f"{PROGRAM}: {exc.one_line()} (using default runtimes for {args.subcommand})\n"
        )
        return Config()


def prepare(args: RuncArgs, argv0: str, environ: Mapping[str, str]) -> str:
    """Do Radium's part of this invocation; return the runtime to exec."""
    config = load_config(args, environ)
    runtime = find_runtime(config, environ, argv0)
    if args.edits_spec and args.bundle is not None:
        logs.setup(PROGRAM, config.runtime.log_file, stderr_level=logging.CRITICAL)
        edit_bundle(args.bundle, config, environ)
    return runtime


def run(argv: Sequence[str], environ: Mapping[str, str]) -> int:
    from radium.shim.argv import parse

    args = parse(argv[1:])
    if args.edits_spec:
        # Records go to the log file once the config names it; stderr gets report()'s line only.
        logs.setup(PROGRAM, "", stderr_level=logging.CRITICAL)
    try:
        runtime = prepare(args, argv[0], environ)
    except RadiumError as exc:
        if args.edits_spec:
            log.error("%s", exc.one_line())
        report(args, exc.one_line())
        return 1
    os.execv(runtime, [runtime, *argv[1:]])
