"""radium-runtime on create/run: edit the spec when the container asks for Radium, exec runc.

A container that asks nothing is not touched (its config.json stays byte-identical) and costs a
JSON parse: the config, logging and the modifiers are imported only for containers that ask.
Errors are JSON (or text) lines in runc's ``--log`` file, which is where docker and containerd
look for the reason a runtime failed, and one line on stderr.
"""

from __future__ import annotations

import json
import os
import sys

from radium.errors import RadiumError, RuntimeNotFoundError
from radium.shim import passthrough, specedit

# Not typing.TYPE_CHECKING: importing typing costs milliseconds on every container start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping, Sequence

    from radium.shim.argv import RuncArgs

__all__ = ["PROGRAM", "find_runtime", "prepare", "report", "run"]

PROGRAM = "radium-runtime"


def find_runtime(runtimes: Sequence[str], environ: Mapping[str, str], self_path: str) -> str:
    """The first of ``runtimes`` that exists and is not this wrapper."""
    runtime = passthrough.find_runtime(runtimes, environ, self_path)
    if runtime is None:
        raise RuntimeNotFoundError(
            f"none of the OCI runtimes {list(runtimes)} is installed",
            hint="install runc (apt-get install runc) or set runtime.runtimes in the Radium config",
        )
    return runtime


def prepare(bundle: str, argv0: str, environ: Mapping[str, str]) -> str:
    """Edit the bundle when its container asks for Radium; return the runtime to exec."""
    config = specedit.edit_bundle(bundle, environ, PROGRAM, lambda c: c.runtime.log_file)
    if config is None:
        return find_runtime(passthrough.configured_runtimes(environ), environ, argv0)
    return find_runtime(config.runtime.runtimes, environ, argv0)


def report(args: RuncArgs, message: str) -> None:
    """Tell the engine (runc's --log file), the user (stderr) and our log what failed."""
    import datetime

    logging = sys.modules.get("logging")
    if logging is not None and logging.getLogger().handlers:  # only once logs.setup ran
        logging.getLogger(__name__).error("%s", message)
    sys.stderr.write(f"{PROGRAM}: {message}\n")
    if not args.log_file:
        return
    now = datetime.datetime.now(datetime.timezone.utc).isoformat()
    if args.log_format == "json":
        line = json.dumps({"level": "error", "msg": f"{PROGRAM}: {message}", "time": now})
    else:
        line = f"time={json.dumps(now)} level=error msg={json.dumps(PROGRAM + ': ' + message)}"
    try:
        with open(args.log_file, "a", encoding="utf-8") as f:
            f.write(line + "\n")
    except OSError as exc:
        sys.stderr.write(f"{PROGRAM}: cannot write to {args.log_file}: {exc.strerror}\n")


def run(argv: Sequence[str], environ: Mapping[str, str], args: RuncArgs) -> int:
    """create/run: edit the spec if asked, then exec the runtime with the same argv."""
    try:
        runtime = prepare(args.bundle or os.getcwd(), argv[0], environ)
    except RadiumError as exc:
        report(args, exc.one_line())
        return 1
    except Exception as exc:  # a bug: one line for the engine, the traceback for our log
        logging = sys.modules.get("logging")
        if logging is not None and logging.getLogger().handlers:
            logging.getLogger(__name__).exception("internal error")
        report(args, f"internal error ({type(exc).__name__}: {exc}); see {PROGRAM}'s log")
        return 2
    os.execv(runtime, [runtime, *argv[1:]])
