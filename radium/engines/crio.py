"""CRI-O: a drop-in ``crio.conf.d/99-radium.conf`` with the ``radium`` runtime handler.

CRI-O copies pod annotations into the OCI spec, where radium-runtime reads ``radium.io/*``.
"""

from __future__ import annotations

from pathlib import Path

import tomlkit

from radium.engines.base import Options, Owned, Plan

__all__ = ["DEFAULT_DROPIN", "RUNTIME_NAME", "dropin", "plan"]

DEFAULT_DROPIN = Path("/etc/crio/crio.conf.d/99-radium.conf")
RUNTIME_NAME = "radium"


def dropin(options: Options) -> bytes:
    """CRI-O's drop-in config naming the ``radium`` runtime."""
    doc = tomlkit.document()
    doc.add(
        tomlkit.comment("Written by `radium setup crio`; `radium setup crio --remove` deletes it.")
    )
    crio = tomlkit.table(is_super_table=True)
    runtime_section = tomlkit.table(is_super_table=not options.set_as_default)
    if options.set_as_default:
        runtime_section.add("default_runtime", RUNTIME_NAME)
    runtimes = tomlkit.table(is_super_table=True)
    handler = tomlkit.table()
    handler.add("runtime_path", options.programs["radium-runtime"])
    handler.add("runtime_type", "oci")
    handler.add("runtime_root", "/run/radium/runc")
    runtimes.add(RUNTIME_NAME, handler)
    runtime_section.add("runtimes", runtimes)
    crio.add("runtime", runtime_section)
    doc.add("crio", crio)
    return tomlkit.dumps(doc).encode()


def plan(options: Options, dropin_path: Path = DEFAULT_DROPIN) -> Plan:
    """Setting CRI-O up: its drop-in."""
    return Plan(
        files=(Owned(dropin_path, dropin(options)),),
        restart_unit="crio",
        restart_hint="restart CRI-O (systemctl restart crio) for the runtime handler to appear",
    )
