"""The agent's thin client in C (agent_call.c), built beside the fronts where a compiler is, and
the fronts' own decision in C (runtime_front.c): one program, installed under two names.

A leased container start runs the start socket's client three or four times (create, prestart,
poststop, and the shim's delete). The Python client costs about 10 ms of interpreter each time;
the same client in C about 1 ms. The shell fronts run on every call an engine makes (four per
docker container), and their two greps cost about 2 ms each; the same rule in C costs a tenth
of a millisecond (docs/runtime-front.md). ``radium setup ENGINE``, scripts/setup and
scripts/build-deb build it; where no C compiler is, the fronts and the agent keep to the shell
and the Python client, and a leased start costs 25 to 45 ms more (`radium setup` says so;
measured by `benchmarks/container_start.py --install` on a pip install without and with it).

    python -m radium.agent.nativeclient [SCRIPTS_DIR]
"""

from __future__ import annotations

import functools
import hashlib
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

__all__ = [
    "CFLAGS",
    "FRONT",
    "HEADER",
    "NAME",
    "SOURCE",
    "SOURCES",
    "build",
    "compiler",
    "ensure",
    "installed",
    "main",
    "renew_stale",
    "source_mark",
]

log = logging.getLogger(__name__)
#: The built client's name, beside the Python one (bin/radium-agent-call).
NAME = "radium-agent-call-native"
#: The same program under the name it runs as the fronts' decision by: a copy, not a link, so
#: that an older installation rebuilding NAME never leaves this name on a program without it.
FRONT = "radium-front-native"
SOURCE = Path(__file__).with_name("agent_call.c")
#: Every file of the program: what it is compiled from, and what its mark digests.
SOURCES = (SOURCE, SOURCE.with_name("runtime_front.c"))
HEADER = SOURCE.with_name("agent_call.h")
#: Hardened as distributions build setuid-adjacent programs: it runs as root on every start.
CFLAGS = (
    "-O2", "-Wall", "-Wextra", "-D_FORTIFY_SOURCE=2", "-fstack-protector-strong",
    "-fPIE", "-pie", "-Wl,-z,relro,-z,now",
)  # fmt: skip


@functools.cache
def source_mark() -> bytes:
    """What a build of this source carries in its file (``SOURCE_MARK`` in agent_call.c)."""
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in (*SOURCES, HEADER))).hexdigest()[:16]
    return f"radium-agent-call source {digest}".encode()


def installed(scripts: str) -> Optional[str]:
    """The client built from this source in ``scripts``, or None: not built there, or built
    from another source (an older installation's: ``pip install -U`` leaves the client that
    `radium setup` built, and it speaks the protocol of the version that built it)."""
    path = os.path.join(scripts, NAME)
    return path if os.access(path, os.X_OK) and _built_from_this(path) else None


def _built_from_this(path: str) -> bool:
    try:
        return source_mark() in Path(path).read_bytes()
    except OSError:
        return False


def compiler() -> Optional[str]:
    """The C compiler to build the native client with, if any (``CC``, else ``gcc``)."""
    return shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")


def build(scripts: Path, cc: Optional[str]) -> Path:
    """Compile the client with ``cc`` (:func:`compiler`) into ``scripts``, atomically replacing
    an older build."""
    if cc is None:
        raise BuildError(
            "no C compiler (cc) to build the agent's native client",
            hint="install gcc and run this again; until then starts use the Python client"
            " (a leased start costs 25 to 45 ms more)",
        )
    target = scripts / NAME
    try:
        mark = f'-DRADIUM_SOURCE_MARK="{source_mark().decode()}"'
    except OSError as exc:
        raise BuildError(
            f"cannot read the native client's source {SOURCE}: {exc.strerror or exc}",
            hint="reinstall radium",
        ) from exc
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{NAME}.", dir=scripts)
    except OSError as exc:
        raise BuildError(
            f"cannot write the agent's native client into {scripts}: {exc.strerror or exc}",
            hint="run `radium setup ENGINE` as the user who installed radium",
        ) from exc
    os.close(fd)
    front = f"{tmp}.front"
    try:
        result = subprocess.run(
            [cc, *CFLAGS, mark, "-o", tmp, *map(str, SOURCES)],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise BuildError(
                f"building {NAME} failed: {result.stderr.strip().splitlines()[-1:]}",
                hint="report it; until then starts use the Python client",
            )
        os.chmod(tmp, 0o755)
        shutil.copy2(tmp, front)
        os.replace(front, scripts / FRONT)
        os.replace(tmp, target)
    finally:
        for leftover in (tmp, front):
            if os.path.exists(leftover):
                os.unlink(leftover)
    return target


def ensure(scripts: Path) -> str:
    """Build the client into ``scripts`` unless it is there from this source (a package ships
    it built): what was done, as a line for `radium setup` to print. A client built from
    another source is rebuilt, or removed where it cannot be: the fronts run any client they
    find, and the Python one always speaks this version's protocol."""
    target = scripts / NAME
    current = installed(str(scripts)) is not None
    if current and _built_from_this(str(scripts / FRONT)):
        return f"{target}: present"
    stale = target.exists() and not current
    try:
        built = build(scripts, compiler())
    except BuildError as exc:
        removed = ""
        if stale:
            try:
                (scripts / FRONT).unlink(missing_ok=True)
                target.unlink()
                removed = "; the one built from another version is removed"
            except OSError as gone:
                removed = f"; the one built from another version stays ({gone.strerror})"
        return f"{target}: not built ({exc.one_line()}){removed}"
    if stale:
        return f"{built}: rebuilt (the one there was built from another version)"
    return f"{built}: built"


def renew_stale(scripts: Path) -> Optional[str]:
    """:func:`ensure` if ``scripts`` holds a client built from another source (what was done),
    else None: the agent calls it when it starts, so an upgrade without `radium setup` does
    not leave the fronts running an older version's client."""
    target = scripts / NAME
    if not target.exists() or installed(str(scripts)):
        return None
    return ensure(scripts)


def main(argv: Sequence[str] | None = None) -> int:
    """Build the native client into a scripts directory, if a compiler is there; prints where."""
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
