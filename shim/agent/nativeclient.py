"""The agent's thin client in C (agent_call.c), built beside the fronts where a compiler is.

A leased container start runs the start socket's client three or four times (create, prestart,
poststop, and the shim's delete). The Python client costs about 10 ms of interpreter each time;
the same client in C about 1 ms. ``radium setup ENGINE``, scripts/setup and scripts/build-deb
build it; where no C compiler is, the fronts and the agent keep to the Python client and a start
costs about 30 ms more (`radium setup` says so).

    python -m radium.shim.agent.nativeclient [SCRIPTS_DIR]
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Optional, Sequence

from radium.errors import BuildError, RadiumError

log = logging.getLogger(__name__)
#: The built client's name, beside the Python one (bin/radium-agent-call).
NAME = "radium-agent-call-native"
SOURCE = Path(__file__).with_name("agent_call.c")
#: Hardened as distributions build setuid-adjacent programs: it runs as root on every start.
CFLAGS = (
    "-O2", "-Wall", "-Wextra", "-D_FORTIFY_SOURCE=2", "-fstack-protector-strong",
    "-fPIE", "-pie", "-Wl,-z,relro,-z,now",
)  # fmt: skip


def installed(scripts: str) -> Optional[str]:
    """The built client in ``scripts``, or None when it was not built there."""
    path = os.path.join(scripts, NAME)
    return path if os.access(path, os.X_OK) else None


def compiler() -> Optional[str]:
    return shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")


def build(scripts: Path, cc: Optional[str]) -> Path:
    """Compile the client with ``cc`` (:func:`compiler`) into ``scripts``, atomically replacing
    an older build."""
    if cc is None:
        raise BuildError(
            "no C compiler (cc) to build the agent's native client",
            hint="install gcc and run this again; until then starts use the Python client",
        )
    target = scripts / NAME
    fd, tmp = tempfile.mkstemp(prefix=f".{NAME}.", dir=scripts)
    os.close(fd)
    try:
        result = subprocess.run(
            [cc, *CFLAGS, "-o", tmp, str(SOURCE)], capture_output=True, text=True, check=False
        )
        if result.returncode != 0:
            raise BuildError(
                f"building {NAME} failed: {result.stderr.strip().splitlines()[-1:]}",
                hint="report it; until then starts use the Python client",
            )
        os.chmod(tmp, 0o755)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def ensure(scripts: Path) -> str:
    """Build the client into ``scripts`` unless it is there (a package ships it built): what
    was done, as a line for `radium setup` to print."""
    if installed(str(scripts)):
        return f"{scripts / NAME}: present"
    try:
        return f"{build(scripts, compiler())}: built"
    except BuildError as exc:
        return f"{scripts / NAME}: not built ({exc.one_line()})"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    scripts = Path(args[0] if args else sysconfig.get_path("scripts"))
    try:
        print(build(scripts, compiler()))
    except RadiumError as exc:
        print(f"radium: {exc.one_line()}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
